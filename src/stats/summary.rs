//! Pure summary: a merged `Recorder` and the scenario become a `ScenarioReport`,
//! with its findings (`diagnose`).

use std::collections::BTreeMap;
use std::time::Duration;

use super::raw::{RawScenario, ScenarioShape};
use super::recorder::{PhaseSet, PhaseStat, Recorder};
use crate::cpu::CpuTime;
use crate::plan::Strategy;
use crate::proto::h2::wire::error_code_name;
use crate::record::{CloseReason, ErrorDetail, ErrorKind, Phase, PhaseMap};
use crate::report::{
    ConnectionsReport, CpuReport, DnsReport, EarlyDataReport, H2Report, KernelReport,
    LatencyReport, LoadReport, LocalPortsReport, PeakReport, PhaseGroup, PhaseMeans, PhaseSummary,
    PhasesReport, ProxyReport, QuicReport, RequestsReport, RetriesReport, RpcReport,
    ScenarioReport, Spread, ThroughputReport, TimelineBucket, TlsHandshakes,
};

const NS_PER_MS: f64 = 1e6;

fn ms(ns: u64) -> f64 {
    ns as f64 / NS_PER_MS
}

fn phase_summary(p: &PhaseStat) -> PhaseSummary {
    if p.count == 0 {
        return PhaseSummary::default();
    }
    let n = p.count as f64;
    let mean = p.sum_ns as f64 / n;
    let var = (p.sum_sq as f64 / n - mean * mean).max(0.0);
    PhaseSummary {
        count: p.count,
        min: ms(p.min_ns),
        mean: mean / NS_PER_MS,
        stdev: var.sqrt() / NS_PER_MS,
        p50: ms(p.hist.value_at_quantile(0.50)),
        p90: ms(p.hist.value_at_quantile(0.90)),
        p99: ms(p.hist.value_at_quantile(0.99)),
        max: ms(p.max_ns),
    }
}

fn group(set: &PhaseSet, requests: u64) -> PhaseGroup {
    PhaseGroup {
        requests,
        phases: PhaseMap::from_fn(|p| phase_summary(&set[p])),
    }
}

/// Each phase's sum over all ok requests divided by their number, in ms.
fn phase_means(rec: &Recorder) -> PhaseMeans {
    PhaseMeans(PhaseMap::from_fn(|p| {
        if rec.counts.answered == 0 || p == Phase::Total {
            return 0.0;
        }
        let sum = rec.phases_new[p].sum_ns + rec.phases_reused[p].sum_ns;
        sum as f64 / rec.counts.answered as f64 / NS_PER_MS
    }))
}

/// Percentiles of a latency histogram, for distribution charts.
fn distribution(p: &PhaseStat) -> Vec<[f64; 2]> {
    if p.count == 0 {
        return Vec::new();
    }
    let mut qs: Vec<f64> = (0..=20).map(|i| f64::from(i) * 5.0).collect();
    qs.extend([99.0, 99.9]);
    qs.sort_by(f64::total_cmp);
    qs.into_iter()
        .map(|q| {
            let v = match q {
                0.0 => p.min_ns,
                100.0 => p.max_ns,
                _ => p.hist.value_at_quantile(q / 100.0),
            };
            [q, ms(v)]
        })
        .collect()
}

fn h2_report(sc: &ScenarioShape, rec: &Recorder) -> H2Report {
    let closed = rec.counts.connections_closed;
    H2Report {
        connections_per_origin: sc.connections_per_origin,
        peak_concurrent_streams: PeakReport {
            max: rec.peak_streams_max,
            mean: if closed > 0 {
                rec.counts.peak_streams_sum as f64 / closed as f64
            } else {
                0.0
            },
        },
        server_settings: rec.server_settings,
        goaway_codes: rec
            .goaway_codes
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (error_code_name(code as u32).to_string(), *n))
            .collect(),
    }
}

fn spread(s: &crate::stats::recorder::Span) -> Spread {
    Spread {
        count: s.count,
        min: ms(s.min_ns),
        mean: s.mean_ns() / NS_PER_MS,
        max: ms(s.max_ns),
    }
}

/// The kernel's view of the TCP connections; none when none was read.
fn kernel_report(rec: &Recorder) -> Option<KernelReport> {
    let t = &rec.tcp;
    if t.connects == 0 && t.closed == 0 {
        return None;
    }
    let some = |s: &super::recorder::Span| (s.count > 0).then(|| spread(s));
    Some(KernelReport {
        connects: t.connects,
        min_rtt_ms: phase_summary(&t.rtt),
        syn_retransmitted: t.syn_retransmitted,
        syn_retransmits: t.syn_retransmits,
        syn_retransmitted_connect_ms: some(&t.syn_connect),
        closed: t.closed,
        rtt_at_close_ms: some(&t.rtt_at_close),
        retransmits: t.retransmits,
        connections_with_retransmits: t.with_retransmits,
    })
}

fn quic_report(sc: &ScenarioShape, rec: &Recorder) -> QuicReport {
    let q = &rec.quic;
    let shared = sc.strategy == Strategy::H3;
    let closed = rec.counts.connections_closed;
    QuicReport {
        connections_per_origin: shared.then_some(sc.connections_per_origin),
        peak_concurrent_streams: shared.then(|| PeakReport {
            max: rec.peak_streams_max,
            mean: if closed > 0 {
                rec.counts.peak_streams_sum as f64 / closed as f64
            } else {
                0.0
            },
        }),
        handshake_ms: spread(&q.handshake),
        early_request_lead_ms: (q.early_lead.count > 0).then(|| spread(&q.early_lead)),
        rtt_ms: spread(&q.rtt),
        packets_sent: q.packets_sent,
        packets_lost: q.packets_lost,
        bytes_lost: q.bytes_lost,
        congestion_events: q.congestion_events,
        connections_ended: q.connections,
        handshake_extra_round_trips: rec.counts.quic_flight_waits,
    }
}

/// The report of a scenario with its lossless form (`raw`), for `--json` readers and
/// `merge`.
pub(crate) fn summarize_with_raw(
    sc: &ScenarioShape,
    rec: &Recorder,
    wall: Duration,
    cpu: CpuTime,
) -> ScenarioReport {
    let mut rep = summarize(sc, rec, wall, cpu);
    rep.raw = Some(RawScenario::new(sc.clone(), rec, wall, cpu));
    rep
}

pub(crate) fn summarize(
    sc: &ScenarioShape,
    rec: &Recorder,
    wall: Duration,
    cpu: CpuTime,
) -> ScenarioReport {
    let mut rep = summarize_counts(sc, rec, wall, cpu);
    rep.diagnosis = super::diagnose::diagnose(sc, rec, &rep);
    rep.headline = super::diagnose::headline(&rep, &rep.diagnosis);
    rep
}

fn summarize_counts(
    sc: &ScenarioShape,
    rec: &Recorder,
    wall: Duration,
    cpu: CpuTime,
) -> ScenarioReport {
    let wall_s = wall.as_secs_f64();
    let url = sc.url.clone();
    let cpu_us = cpu.total().as_secs_f64() * 1e6;
    ScenarioReport {
        name: sc.name.clone(),
        url,
        urls: sc.urls,
        strategy: sc.strategy.name().to_string(),
        protocol: sc.strategy.protocol().to_string(),
        concurrency: sc.concurrency,
        threads: sc.threads.clamp(1, sc.concurrency.max(1)),
        duration_s: wall_s,
        load: LoadReport {
            requests: sc.requests,
            duration_s: sc.duration_s,
            rate: sc.rate,
            timeout_s: sc.timeout_s,
            requests_per_connection: sc.requests_per_connection,
            connect_rate: sc.connect_rate,
        },
        requests: requests_report(rec, sc),
        connections: connections_report(sc, rec),
        throughput: ThroughputReport {
            requests_per_s: if wall_s > 0.0 {
                rec.counts.answered as f64 / wall_s
            } else {
                0.0
            },
            bytes_received: rec.counts.bytes_received,
            body_bytes_received: rec.counts.body_bytes,
        },
        latency_ms: latency_report(rec),
        phases_ms: PhasesReport {
            new: group(
                &rec.phases_new,
                rec.counts.answered - rec.counts.reused_requests,
            ),
            reused: group(&rec.phases_reused, rec.counts.reused_requests),
            mean_per_request: phase_means(rec),
        },
        cpu: CpuReport {
            client_user_s: cpu.user.as_secs_f64(),
            client_sys_s: cpu.sys.as_secs_f64(),
            client_us_per_request: if rec.counts.attempted > 0 {
                cpu_us / rec.counts.attempted as f64
            } else {
                0.0
            },
        },
        dns: DnsReport {
            cache: if sc.dns_cache { "on" } else { "off" },
            lookups: rec.counts.dns_lookups,
            cache_hits: rec.counts.dns_cache_hits,
            joined: rec.counts.dns_joined,
        },
        local_ports: rec.local_ports.map(|p| LocalPortsReport {
            time_wait: p.time_wait,
            port_range: p.range.map(|(lo, hi)| [lo, hi]),
        }),
        headline: None,
        diagnosis: Vec::new(),
        timeline: timeline(&rec.timeline, wall_s),
        outages: crate::report::OutagesReport::new(&rec.outages, &rec.restarts),
        raw: None,
    }
}

fn requests_report(rec: &Recorder, sc: &ScenarioShape) -> RequestsReport {
    let errors: BTreeMap<String, u64> = ErrorKind::ALL
        .iter()
        .map(|k| (k.name().to_string(), rec.errors[k.index()]))
        .collect();
    let error_details: BTreeMap<String, u64> = ErrorDetail::ALL
        .iter()
        .map(|d| (d.name().to_string(), rec.error_details[d.index()]))
        .filter(|(_, n)| *n > 0)
        .collect();
    let status_codes: BTreeMap<String, u64> = rec
        .status
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(code, n)| (code.to_string(), *n))
        .collect();
    let status_classes: BTreeMap<String, u64> = (1..=5)
        .map(|c| {
            let n: u64 = rec.status[c * 100..(c + 1) * 100].iter().sum();
            (format!("{c}xx"), n)
        })
        .collect();
    let non_2xx = rec.counts.answered - status_classes["2xx"];
    let error_status = rec.error_status();
    RequestsReport {
        attempted: rec.counts.attempted,
        ok: rec.counts.answered - error_status,
        error_status,
        answered: rec.counts.answered,
        errors,
        error_details,
        error_examples: super::raw::named(&rec.error_examples),
        error_hops: super::raw::named(&rec.error_hops),
        retries: RetriesReport {
            stale_connection: rec.counts.stale_retries,
            refused_stream: rec.counts.refused_retries,
        },
        status_codes,
        status_examples: rec
            .status_examples
            .iter()
            .map(|(k, m)| (k.to_string(), m.clone()))
            .collect(),
        status_classes,
        non_2xx,
        retry_after_s: rec.retry_after_s,
        aborted_at_deadline: rec.counts.aborted_at_deadline,
        late_sends: rec.counts.late_sends,
        redirects: sc.redirects.then_some(rec.counts.redirects),
    }
}

fn connections_report(sc: &ScenarioShape, rec: &Recorder) -> ConnectionsReport {
    let close_reasons: BTreeMap<String, u64> = CloseReason::ALL
        .iter()
        .map(|r| (r.name().to_string(), rec.close_reasons[r.index()]))
        .collect();
    let closed = rec.counts.connections_closed;
    ConnectionsReport {
        opened: rec.counts.connections_opened,
        reused_requests: rec.counts.reused_requests,
        reuse_ratio: if rec.counts.answered > 0 {
            rec.counts.reused_requests as f64 / rec.counts.answered as f64
        } else {
            0.0
        },
        tls_handshakes: TlsHandshakes {
            full: rec.counts.tls_full,
            resumed: rec.counts.tls_resumed,
            tls13: rec.counts.tls13,
            key_exchange: rec.key_exchange(),
            hello_retry_requests: rec.counts.tls_hello_retries,
            client_hello_bytes: mean_of(
                rec.counts.tls_client_hello_bytes,
                rec.counts.tls_wire_full,
            ),
            server_flight_bytes: mean_of(
                rec.counts.tls_server_flight_bytes,
                rec.counts.tls_wire_full,
            ),
            first_flight_extra_round_trips: rec.counts.tls_flight_waits,
            client_certificate: sc.client_certificate.clone(),
        },
        close_reasons,
        requests_per_connection: RpcReport {
            min: if closed > 0 { rec.rpc_min } else { 0 },
            mean: if closed > 0 {
                rec.counts.rpc_sum as f64 / closed as f64
            } else {
                0.0
            },
            max: rec.rpc_max,
        },
        server_ignored_close: rec.counts.server_ignored_close,
        early_data: EarlyDataReport {
            attempted: rec.counts.early_attempted,
            accepted: rec.counts.early_accepted,
            rejected: rec.counts.early_rejected,
        },
        h2: (sc.strategy == Strategy::H2).then(|| h2_report(sc, rec)),
        kernel: kernel_report(rec),
        quic: sc.strategy.quic().then(|| quic_report(sc, rec)),
        proxy: sc.proxy.as_ref().map(|url| ProxyReport {
            url: url.clone(),
            tunnels: rec.counts.tunnels,
        }),
        by_origin: sc.redirects.then(|| {
            sc.origin_names
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    (
                        name.clone(),
                        rec.opened_by_origin.get(i).copied().unwrap_or(0),
                    )
                })
                .collect()
        }),
        by_source_address: (!sc.local_addrs.is_empty()).then(|| {
            sc.local_addrs
                .iter()
                .enumerate()
                .map(|(i, a)| (a.clone(), rec.opened_by_source.get(i).copied().unwrap_or(0)))
                .collect()
        }),
        keep_alive_header: rec.keep_alive_header,
    }
}

/// The latency of every ok request, new connection or reused.
fn latency_report(rec: &Recorder) -> LatencyReport {
    let mut latency = rec.phases_new[Phase::Total].clone();
    latency += &rec.phases_reused[Phase::Total];
    let lat = phase_summary(&latency);
    let percentiles = distribution(&latency);
    let p999 = if latency.count > 0 {
        ms(latency.hist.value_at_quantile(0.999))
    } else {
        0.0
    };
    LatencyReport {
        mean: lat.mean,
        p50: lat.p50,
        p90: lat.p90,
        p99: lat.p99,
        p999,
        max: lat.max,
        percentiles,
    }
}

/// The timeline's buckets as reported; the last one ends with the run.
pub(crate) fn timeline(t: &crate::stats::timeline::Timeline, wall_s: f64) -> Vec<TimelineBucket> {
    let width = t.width_s() as f64;
    t.trimmed()
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let t_s = i as f64 * width;
            let q = |p: f64| {
                b.latency
                    .as_ref()
                    .filter(|h| !h.is_empty())
                    .map(|h| h.value_at_quantile(p) as f64 / 1000.0)
            };
            TimelineBucket {
                t_s,
                width_s: if wall_s > t_s && wall_s < t_s + width {
                    wall_s - t_s
                } else {
                    width
                },
                requests: b.requests,
                ok: b.ok,
                error_status: b.error_status,
                errors: b.errors_total(),
                errors_by_kind: ErrorKind::ALL
                    .iter()
                    .filter(|k| b.errors[k.index()] > 0)
                    .map(|k| (k.name().to_string(), u64::from(b.errors[k.index()])))
                    .collect(),
                new_connections: b.new_connections,
                closed_connections: b.closed_total(),
                close_reasons: CloseReason::ALL
                    .iter()
                    .filter(|r| b.closed[r.index()] > 0)
                    .map(|r| (r.name().to_string(), u64::from(b.closed[r.index()])))
                    .collect(),
                tls_full: b.tls_full,
                tls_resumed: b.tls_resumed,
                p50_ms: q(0.5),
                p99_ms: q(0.99),
            }
        })
        .collect()
}

/// `sum / n`, none when `n` is 0.
fn mean_of(sum: u64, n: u64) -> Option<f64> {
    (n > 0).then(|| sum as f64 / n as f64)
}
