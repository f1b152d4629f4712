//! The lossless form of a scenario's figures (the types are in `report::raw`): a
//! recorder written into it, and rebuilt from it exactly, so that `merge` can add
//! several agents' recorders and summarize them as one run.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer as _, V2Serializer};
use hdrhistogram::{Counter, Histogram};

use super::recorder::{
    PhaseSet, PhaseStat, QuicStats, Recorder, Span, TcpStats, GOAWAY_SLOTS, MAX_NS,
};
use super::timeline::{Bucket, Timeline};
use crate::cpu::CpuTime;
use crate::net::local_ports::LocalPorts;
use crate::record::{CloseReason, ErrorDetail, ErrorKind, Phase};
pub(crate) use crate::report::raw::{
    RawBucket, RawLocalPorts, RawPhase, RawQuic, RawRecorder, RawScenario, RawSpan, RawTcp,
    RawTimeline, ScenarioShape,
};

impl RawScenario {
    pub(crate) fn new(shape: ScenarioShape, rec: &Recorder, wall: Duration, cpu: CpuTime) -> Self {
        RawScenario {
            shape,
            wall_ns: wall.as_nanos() as u64,
            cpu_user_ns: cpu.user.as_nanos() as u64,
            cpu_sys_ns: cpu.sys.as_nanos() as u64,
            recorder: RawRecorder::from(rec),
        }
    }
}

/// A histogram in HdrHistogram's V2 form, base64.
pub(crate) fn encode_histogram<T: Counter>(h: &Histogram<T>) -> String {
    let mut buf = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut buf)
        .expect("a histogram serializes into memory");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

fn decode_histogram<T: Counter>(s: &str) -> Result<Histogram<T>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| format!("not base64: {e}"))?;
    Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| format!("not an HdrHistogram V2 histogram: {e:?}"))
}

fn nonzero<'a>(pairs: impl Iterator<Item = (&'a str, u64)>) -> BTreeMap<String, u64> {
    pairs
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| (k.to_string(), n))
        .collect()
}

fn phases(set: &PhaseSet) -> BTreeMap<String, RawPhase> {
    set.iter()
        .filter(|(_, p)| p.count > 0)
        .map(|(phase, p)| (phase.name().to_string(), raw_phase(p)))
        .collect()
}

fn raw_phase(p: &PhaseStat) -> RawPhase {
    RawPhase {
        count: p.count,
        sum_ns: p.sum_ns,
        sum_sq: p.sum_sq,
        min_ns: p.min_ns,
        max_ns: p.max_ns,
        histogram: encode_histogram(&in_its_range(&p.hist)),
    }
}

/// The histogram over 1 ns to its own largest value: a phase's histogram grows as values
/// come, so its range depends on their order; the lossless form names a range that
/// depends on its values alone (merges in any order are equal byte for byte).
fn in_its_range(h: &Histogram<u64>) -> Histogram<u64> {
    let mut c = Histogram::new_with_bounds(1, h.max().max(2), 3).expect("valid histogram bounds");
    c.add(h).expect("the range holds every value");
    c
}

fn span(s: &Span) -> RawSpan {
    RawSpan {
        count: s.count,
        sum_ns: s.sum_ns,
        min_ns: s.min_ns,
        max_ns: s.max_ns,
    }
}

/// A map keyed by a static name, keyed by an owned one (as the report's maps are).
pub(crate) fn named<T: Clone>(
    m: &std::collections::BTreeMap<&'static str, T>,
) -> BTreeMap<String, T> {
    m.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

impl From<&Recorder> for RawRecorder {
    fn from(r: &Recorder) -> Self {
        let q = &r.quic;
        RawRecorder {
            phases_new: phases(&r.phases_new),
            phases_reused: phases(&r.phases_reused),
            counts: r.counts,
            errors: nonzero(
                ErrorKind::ALL
                    .iter()
                    .map(|k| (k.name(), r.errors[k.index()])),
            ),
            error_details: nonzero(
                ErrorDetail::ALL
                    .iter()
                    .map(|d| (d.name(), r.error_details[d.index()])),
            ),
            error_examples: named(&r.error_examples),
            error_hops: named(&r.error_hops),
            status_codes: r
                .status
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(code, n)| (code.to_string(), *n))
                .collect(),
            status_examples: r
                .status_examples
                .iter()
                .map(|(k, m)| (k.to_string(), m.clone()))
                .collect(),
            opened_by_origin: beyond_the_first(&r.opened_by_origin),
            ignored_close_by_origin: beyond_the_first(&r.ignored_close_by_origin),
            opened_by_source: r.opened_by_source.clone(),
            outages: r.outages.clone(),
            restarts: r.restarts.clone(),
            retry_after_s: r.retry_after_s,
            close_reasons: nonzero(
                CloseReason::ALL
                    .iter()
                    .map(|c| (c.name(), r.close_reasons[c.index()])),
            ),
            rpc_min: (r.counts.connections_closed > 0).then_some(r.rpc_min),
            rpc_max: r.rpc_max,
            goaway_codes: r
                .goaway_codes
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(code, n)| (code.to_string(), *n))
                .collect(),
            peak_streams_max: r.peak_streams_max,
            server_settings: r.server_settings,
            keep_alive_header: r.keep_alive_header,
            local_ports: r.local_ports.map(|p| RawLocalPorts {
                time_wait: p.time_wait,
                range: p.range.map(|(lo, hi)| [lo, hi]),
            }),
            tcp: raw_tcp(&r.tcp),
            quic: RawQuic {
                handshake: span(&q.handshake),
                early_lead: span(&q.early_lead),
                rtt: span(&q.rtt),
                min_rtt: span(&q.min_rtt),
                packets_sent: q.packets_sent,
                packets_lost: q.packets_lost,
                bytes_lost: q.bytes_lost,
                congestion_events: q.congestion_events,
                connections: q.connections,
            },
            timeline: RawTimeline {
                width_s: r.timeline.width_s(),
                buckets: r
                    .timeline
                    .trimmed()
                    .iter()
                    .map(|b| RawBucket {
                        requests: b.requests,
                        ok: b.ok,
                        error_status: b.error_status,
                        errors: nonzero(
                            ErrorKind::ALL
                                .iter()
                                .map(|k| (k.name(), u64::from(b.errors[k.index()]))),
                        ),
                        new_connections: b.new_connections,
                        closed: nonzero(
                            CloseReason::ALL
                                .iter()
                                .map(|c| (c.name(), u64::from(b.closed[c.index()]))),
                        ),
                        tls_full: b.tls_full,
                        tls_resumed: b.tls_resumed,
                        latency_us: b.latency.as_ref().map(|h| encode_histogram(h.as_ref())),
                    })
                    .collect(),
            },
        }
    }
}

/// Fill `slots` (indexed by `index_of(name)`) from a map by name; an unknown name is an
/// error naming `what`.
fn by_name(
    map: &BTreeMap<String, u64>,
    slots: &mut [u64],
    what: &str,
    index_of: impl Fn(&str) -> Option<usize>,
) -> Result<(), String> {
    for (k, v) in map {
        let i = index_of(k).ok_or_else(|| format!("unknown {what} {k:?}"))?;
        slots[i] += v;
    }
    Ok(())
}

fn kind_index(name: &str) -> Option<usize> {
    ErrorKind::ALL
        .iter()
        .find(|k| k.name() == name)
        .map(|k| k.index())
}

fn reason_index(name: &str) -> Option<usize> {
    CloseReason::ALL
        .iter()
        .find(|k| k.name() == name)
        .map(|k| k.index())
}

fn numeric_index(name: &str, slots: usize) -> Option<usize> {
    name.parse::<usize>().ok().filter(|i| *i < slots)
}

fn phase_set(map: &BTreeMap<String, RawPhase>, set: &mut PhaseSet) -> Result<(), String> {
    for (name, p) in map {
        let phase = Phase::from_name(name).ok_or_else(|| format!("unknown phase {name:?}"))?;
        phase_back(p, &mut set[phase]).map_err(|e| format!("phase {name}: {e}"))?;
    }
    Ok(())
}

/// `p` into the empty `s`.
fn phase_back(p: &RawPhase, s: &mut PhaseStat) -> Result<(), String> {
    let h = decode_histogram::<u64>(&p.histogram)?;
    if h.len() != p.count {
        return Err(format!(
            "the histogram holds {} samples, the count says {}",
            h.len(),
            p.count
        ));
    }
    if h.max() > h.highest_equivalent(MAX_NS) {
        return Err(format!(
            "a value of {} ns is beyond the hour a phase holds",
            h.max()
        ));
    }
    s.hist.add(&h).map_err(|e| format!("{e:?}"))?;
    s.count = p.count;
    s.sum_ns = p.sum_ns;
    s.sum_sq = p.sum_sq;
    s.min_ns = p.min_ns;
    s.max_ns = p.max_ns;
    Ok(())
}

fn raw_tcp(t: &TcpStats) -> RawTcp {
    RawTcp {
        connects: t.connects,
        min_rtt: (t.rtt.count > 0).then(|| raw_phase(&t.rtt)),
        syn_retransmitted: t.syn_retransmitted,
        syn_retransmits: t.syn_retransmits,
        syn_connect: span(&t.syn_connect),
        closed: t.closed,
        rtt_at_close: span(&t.rtt_at_close),
        retransmits: t.retransmits,
        with_retransmits: t.with_retransmits,
    }
}

fn tcp_back(r: &RawTcp) -> Result<TcpStats, String> {
    let mut t = TcpStats::default();
    if let Some(p) = &r.min_rtt {
        phase_back(p, &mut t.rtt).map_err(|e| format!("tcp min_rtt: {e}"))?;
    }
    t.connects = r.connects;
    t.syn_retransmitted = r.syn_retransmitted;
    t.syn_retransmits = r.syn_retransmits;
    t.syn_connect = span_back(&r.syn_connect);
    t.closed = r.closed;
    t.rtt_at_close = span_back(&r.rtt_at_close);
    t.retransmits = r.retransmits;
    t.with_retransmits = r.with_retransmits;
    Ok(t)
}

fn span_back(s: &RawSpan) -> Span {
    Span {
        count: s.count,
        sum_ns: s.sum_ns,
        min_ns: s.min_ns,
        max_ns: s.max_ns,
    }
}

impl TryFrom<&RawRecorder> for Recorder {
    type Error = String;

    fn try_from(r: &RawRecorder) -> Result<Self, String> {
        let mut rec = Recorder {
            opened_by_origin: all_to_the_first(&r.opened_by_origin, r.counts.connections_opened),
            ignored_close_by_origin: all_to_the_first(
                &r.ignored_close_by_origin,
                r.counts.server_ignored_close,
            ),
            opened_by_source: r.opened_by_source.clone(),
            outages: r.outages.clone(),
            restarts: r.restarts.clone(),
            ..Recorder::new()
        };
        phase_set(&r.phases_new, &mut rec.phases_new).map_err(|e| format!("new: {e}"))?;
        phase_set(&r.phases_reused, &mut rec.phases_reused).map_err(|e| format!("reused: {e}"))?;
        rec.counts = r.counts;
        by_name(&r.errors, &mut rec.errors, "error kind", kind_index)?;
        by_name(
            &r.error_details,
            &mut rec.error_details,
            "error detail",
            |n| {
                ErrorDetail::ALL
                    .iter()
                    .find(|d| d.name() == n)
                    .map(|d| d.index())
            },
        )?;
        for (k, m) in &r.error_examples {
            let key = ErrorDetail::ALL
                .iter()
                .map(|d| d.name())
                .chain(ErrorKind::ALL.iter().map(|k| k.name()))
                .find(|n| n == k)
                .ok_or_else(|| format!("unknown error example {k:?}"))?;
            rec.error_examples.insert(key, m.clone());
            if let Some(hop) = r.error_hops.get(k) {
                rec.error_hops.insert(key, hop.clone());
            }
        }
        let slots = rec.status.len();
        by_name(&r.status_codes, &mut rec.status[..], "status code", |n| {
            numeric_index(n, slots)
        })?;
        for (k, m) in &r.status_examples {
            let code: u16 = k
                .parse()
                .ok()
                .filter(|c| (300..600).contains(c))
                .ok_or_else(|| format!("status example of {k:?}: not a 3xx, 4xx or 5xx status"))?;
            rec.status_examples.insert(code, m.clone());
        }
        rec.retry_after_s = r.retry_after_s;
        by_name(
            &r.close_reasons,
            &mut rec.close_reasons,
            "close reason",
            reason_index,
        )?;
        rec.rpc_min = r.rpc_min.unwrap_or(u64::MAX);
        rec.rpc_max = r.rpc_max;
        by_name(&r.goaway_codes, &mut rec.goaway_codes, "GOAWAY code", |n| {
            numeric_index(n, GOAWAY_SLOTS)
        })?;
        rec.peak_streams_max = r.peak_streams_max;
        rec.server_settings = r.server_settings;
        rec.keep_alive_header = r.keep_alive_header;
        rec.local_ports = r.local_ports.map(|p| LocalPorts {
            time_wait: p.time_wait,
            range: p.range.map(|[lo, hi]| (lo, hi)),
        });
        rec.tcp = tcp_back(&r.tcp)?;
        let q = &r.quic;
        rec.quic = QuicStats {
            handshake: span_back(&q.handshake),
            early_lead: span_back(&q.early_lead),
            rtt: span_back(&q.rtt),
            min_rtt: span_back(&q.min_rtt),
            packets_sent: q.packets_sent,
            packets_lost: q.packets_lost,
            bytes_lost: q.bytes_lost,
            congestion_events: q.congestion_events,
            connections: q.connections,
        };
        rec.timeline = timeline_of(r)?;
        Ok(rec)
    }
}

/// The timeline, read back bucket by bucket.
fn timeline_of(r: &RawRecorder) -> Result<Timeline, String> {
    if r.timeline.width_s == 0 && !r.timeline.buckets.is_empty() {
        return Err("timeline: width_s is 0".into());
    }
    let mut buckets = Vec::with_capacity(r.timeline.buckets.len());
    for (i, b) in r.timeline.buckets.iter().enumerate() {
        let mut out = Bucket {
            requests: b.requests,
            ok: b.ok,
            error_status: b.error_status,
            new_connections: b.new_connections,
            tls_full: b.tls_full,
            tls_resumed: b.tls_resumed,
            ..Bucket::default()
        };
        let mut errors = [0u64; ErrorKind::ALL.len()];
        by_name(&b.errors, &mut errors, "error kind", kind_index)?;
        for (a, n) in out.errors.iter_mut().zip(errors) {
            *a = u32::try_from(n).unwrap_or(u32::MAX);
        }
        let mut closed = [0u64; CloseReason::ALL.len()];
        by_name(&b.closed, &mut closed, "close reason", reason_index)?;
        for (a, n) in out.closed.iter_mut().zip(closed) {
            *a = u32::try_from(n).unwrap_or(u32::MAX);
        }
        if let Some(h) = &b.latency_us {
            let h = decode_histogram::<u32>(h).map_err(|e| format!("timeline bucket {i}: {e}"))?;
            out.latency = Some(Box::new(h));
        }
        buckets.push(out);
    }
    Ok(Timeline::from_buckets(r.timeline.width_s.max(1), buckets))
}

/// Counts by origin, written only where an origin beyond the first had any.
fn beyond_the_first(by_origin: &[u64]) -> Vec<u64> {
    if by_origin.len() > 1 {
        by_origin.to_vec()
    } else {
        Vec::new()
    }
}

/// Counts by origin as written, or, where none were (every origin was the first),
/// all of `total` to the first.
fn all_to_the_first(by_origin: &[u64], total: u64) -> Vec<u64> {
    if by_origin.is_empty() {
        vec![total]
    } else {
        by_origin.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{CloseReason, ErrorKind, Outcome, RequestRecord};

    /// A deterministic spread of latencies (ns) from 20 µs to ~3 s, with a long tail.
    fn samples(seed: u64, n: usize) -> Vec<u64> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let r = (x >> 33) % 1_000_000;
                20_000 + r * r / 330
            })
            .collect()
    }

    fn feed(rec: &mut Recorder, ns: &[u64], reused_every: usize) {
        for (i, &v) in ns.iter().enumerate() {
            let mut phases = crate::record::Phases::default();
            phases[Phase::Total] = Some(v);
            phases[Phase::Wait] = Some(v / 2);
            let reused = i % reused_every != 0;
            if !reused {
                phases[Phase::Connect] = Some(v / 10);
                rec.connection_opened(0);
            }
            let outcome = if i % 97 == 0 {
                Outcome::Error(ErrorKind::Reset.into())
            } else {
                Outcome::Ok {
                    status: 200,
                    retry_after_s: None,
                    said: None,
                }
            };
            let r = RequestRecord {
                reused,
                phases,
                outcome,
                bytes_received: 100,
                body_bytes: 10,
                stale_retry: false,
                refused_retry: false,
                late: false,
                redirected: false,
                end: std::time::Instant::now(),
            };
            rec.record(&r);
            if i % reused_every == reused_every - 1 {
                rec.connection_closed(CloseReason::ServerIdleClose, reused_every as u64);
            }
        }
    }

    /// Three recorders, each written out and read back (V2, base64), then added, equal
    /// one recorder fed all the samples: every percentile, every count, the exact sums.
    #[test]
    fn three_recorders_through_json_equal_one_fed_everything() {
        let parts = [samples(1, 5000), samples(2, 3000), samples(3, 7000)];
        let mut one = Recorder::new();
        let mut merged: Option<Recorder> = None;
        for p in &parts {
            feed(&mut one, p, 7);
            let mut r = Recorder::new();
            feed(&mut r, p, 7);
            let json = serde_json::to_string(&RawRecorder::from(&r)).unwrap();
            let back: RawRecorder = serde_json::from_str(&json).unwrap();
            let back = Recorder::try_from(&back).unwrap();
            match &mut merged {
                None => merged = Some(back),
                Some(m) => *m += &back,
            }
        }
        let merged = merged.unwrap();
        for ((_, a), (_, b)) in one
            .phases_new
            .iter()
            .zip(merged.phases_new.iter())
            .chain(one.phases_reused.iter().zip(merged.phases_reused.iter()))
        {
            assert_eq!(a.count, b.count);
            assert_eq!(
                (a.sum_ns, a.sum_sq, a.min_ns, a.max_ns),
                (b.sum_ns, b.sum_sq, b.min_ns, b.max_ns)
            );
            for q in 0..=1000 {
                let q = f64::from(q) / 1000.0;
                assert_eq!(
                    a.hist.value_at_quantile(q),
                    b.hist.value_at_quantile(q),
                    "q {q}"
                );
            }
        }
        assert!(
            one.phases_new[Phase::Wait].count > 1000 && one.phases_reused[Phase::Wait].count > 1000
        );
        assert_eq!(
            (
                one.counts.attempted,
                one.counts.answered,
                one.errors_total(),
                one.counts.connections_opened
            ),
            (
                merged.counts.attempted,
                merged.counts.answered,
                merged.errors_total(),
                merged.counts.connections_opened
            )
        );
        assert_eq!(one.close_reasons, merged.close_reasons);
        assert_eq!(
            (one.rpc_min, one.rpc_max, one.counts.rpc_sum),
            (merged.rpc_min, merged.rpc_max, merged.counts.rpc_sum)
        );
        // And the lossless forms are the same, field for field.
        assert_eq!(RawRecorder::from(&one), RawRecorder::from(&merged));
    }

    fn error_of(raw: &RawRecorder) -> String {
        match Recorder::try_from(raw) {
            Ok(_) => panic!("read without an error"),
            Err(e) => e,
        }
    }

    #[test]
    fn bad_input_is_named() {
        let mut raw = RawRecorder::from(&Recorder::new());
        raw.errors.insert("gremlins".into(), 1);
        assert!(error_of(&raw).contains("unknown error kind \"gremlins\""));
        let mut r = Recorder::new();
        feed(&mut r, &samples(4, 10), 2);
        let mut raw = RawRecorder::from(&r);
        raw.phases_new.get_mut("total").unwrap().histogram = "!!".into();
        assert!(error_of(&raw).contains("not base64"));
        let mut raw = RawRecorder::from(&r);
        raw.phases_new.get_mut("total").unwrap().count += 1;
        assert!(error_of(&raw).contains("the count says"));
        // A phase of two hours (a recorder clamps at one): no report of this tool.
        let mut two_hours = Histogram::<u64>::new(3).unwrap();
        two_hours.record(2 * MAX_NS).unwrap();
        let mut raw = RawRecorder::from(&r);
        let total = raw.phases_new.get_mut("total").unwrap();
        total.histogram = encode_histogram(&two_hours);
        total.count = 1;
        assert!(error_of(&raw).contains("beyond the hour a phase holds"));
    }
}
