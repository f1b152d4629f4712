//! The per-thread recorder: HDR histograms per phase, split by new and reused
//! connections, and counters. Memory depends on the run's shape, never its length.

use std::ops::AddAssign;

use hdrhistogram::Histogram;

use crate::net::dns::Resolution;
use crate::net::kernel::TcpView;
use crate::net::local_ports::LocalPorts;
use crate::proto::h2::wire::ServerSettings;
use crate::record::{status, KeepAliveHeader};
use crate::report::raw::Counts;
use crate::stats::timeline::{Ended, Timeline};

use crate::record::{
    CloseReason, ErrorDetail, ErrorKind, HandshakeKind, Outcome, Phase, PhaseMap, RequestRecord,
    TlsHandshake, KX_COUNTED, KX_GROUPS,
};

/// Longest duration a histogram holds (longer values are clamped): one hour.
pub(crate) const MAX_NS: u64 = 3_600_000_000_000;
/// A handshake is timed against the RTT only where the RTT is a long network's (5 ms or
/// more): below, the handshake's CPU (a millisecond or two with a post-quantum key
/// exchange and an RSA key) could pass for a round trip.
const FLIGHT_RTT_MIN_NS: u64 = 5_000_000;

/// The round trips a handshake of `ns` took beyond the `needed`, at `rtt_ns` (rounded to
/// the nearest); 0 where the RTT is too short to tell.
fn extra_round_trips(ns: u64, rtt_ns: u64, needed: u64) -> u64 {
    if rtt_ns < FLIGHT_RTT_MIN_NS {
        return 0;
    }
    ((ns + rtt_ns / 2) / rtt_ns).saturating_sub(needed)
}
/// The upper bounds of the requests-per-connection buckets.
pub(crate) const RPC_BOUNDS: [u64; 12] = [1, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000, 10000];
/// Status codes are 100..=999; they index a fixed table.
const STATUS_SLOTS: usize = 1000;
/// GOAWAY error codes 0..=13 are named by RFC 9113; the last slot counts the others.
pub(crate) const GOAWAY_SLOTS: usize = 15;

/// One phase's distribution: an HDR histogram plus exact count, sum, sum of squares,
/// min and max (for the ab-style mean and standard deviation).
#[derive(Clone)]
pub(crate) struct PhaseStat {
    pub hist: Histogram<u64>,
    pub count: u64,
    pub sum_ns: u128,
    /// Sum of the squares (ns²), exact: sums merge in any order to the same value.
    pub sum_sq: u128,
    pub min_ns: u64,
    pub max_ns: u64,
}

impl PhaseStat {
    fn new() -> PhaseStat {
        // From 1 ns at 3 significant figures, grown as larger values come (to MAX_NS at
        // most, 270 KB): a phase a run never has costs 24 KB, not 270 KB zeroed and
        // copied with every recorder (20 phases, 5.4 MB per recorder, about 7 ms of a
        // run's CPU before). Growing is a few copies at a run's first slow requests.
        let hist = Histogram::new(3).expect("valid histogram precision");
        PhaseStat {
            hist,
            count: 0,
            sum_ns: 0,
            sum_sq: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    #[inline]
    pub(crate) fn record(&mut self, ns: u64) {
        let v = ns.clamp(1, MAX_NS);
        // Cannot fail: the value is within the bounds.
        let _ = self.hist.record(v);
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.sum_sq += u128::from(ns) * u128::from(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }
}

impl AddAssign<&PhaseStat> for PhaseStat {
    fn add_assign(&mut self, o: &PhaseStat) {
        let _ = self.hist.add(&o.hist);
        self.count += o.count;
        self.sum_ns += o.sum_ns;
        self.sum_sq += o.sum_sq;
        self.min_ns = self.min_ns.min(o.min_ns);
        self.max_ns = self.max_ns.max(o.max_ns);
    }
}

/// Per-phase stats for one connection kind (new or reused).
pub(crate) type PhaseSet = PhaseMap<PhaseStat>;

fn phase_set() -> PhaseSet {
    PhaseMap::from_fn(|_| PhaseStat::new())
}

/// Everything counted during a run, by one thread; merged with `+=`.
#[derive(Clone)]
pub(crate) struct Recorder {
    pub phases_new: PhaseSet,
    pub phases_reused: PhaseSet,
    /// The counters that add up (declared once, in `report::raw::Counts`).
    pub counts: Counts,
    pub errors: [u64; ErrorKind::ALL.len()],
    /// Errors by sub-reason (where one is known).
    pub error_details: [u64; ErrorDetail::ALL.len()],
    /// One full message per error detail (or category, without a detail): the first
    /// seen. Bounded by the number of details.
    pub error_examples: std::collections::BTreeMap<&'static str, String>,
    /// Where the example of an error was met, when it was on the way to a hop other
    /// than the URL's host and port (`--connect-to`, `--resolve`, `--unix-socket`, a
    /// redirect's origin).
    pub error_hops: std::collections::BTreeMap<&'static str, crate::record::Hop>,
    pub status: Box<[u64; STATUS_SLOTS]>,
    /// The statuses `--ok-status` counts as ok beside 2xx and 3xx (the scenario's: set
    /// before the first request, kept by `+=`).
    pub ok_status: Vec<(u16, u16)>,
    /// What the first 3xx/4xx/5xx response of each status said (its status line, and a
    /// redirect's Location or an error's first body bytes): bounded by the statuses the
    /// readers keep.
    pub status_examples: std::collections::BTreeMap<u16, String>,
    /// The last `Retry-After` (seconds) a 429 or 503 carried.
    pub retry_after_s: Option<u32>,
    pub close_reasons: [u64; CloseReason::ALL.len()],
    pub rpc_min: u64,
    pub rpc_max: u64,
    /// Closed connections by the requests each carried, over `RPC_BOUNDS` (the last
    /// slot: more), for the metrics' histogram.
    pub rpc_buckets: [u64; RPC_BOUNDS.len() + 1],
    /// HTTP/2: connections ended by a GOAWAY, by its error code (0..=13; 14: others).
    pub goaway_codes: [u64; GOAWAY_SLOTS],
    /// HTTP/2: the most streams one connection carried at once, over its connections:
    /// the highest and the sum (for the mean).
    pub peak_streams_max: u64,
    /// HTTP/2: the SETTINGS of the first server whose SETTINGS came.
    pub server_settings: Option<ServerSettings>,
    /// What the first HTTP/1 `Keep-Alive` header seen announced.
    pub keep_alive_header: Option<KeepAliveHeader>,
    /// Taken at the end of a run in which connects found no free local port.
    pub local_ports: Option<LocalPorts>,
    /// What the kernel said about the TCP connections.
    pub tcp: TcpStats,
    /// HTTP/3: what quinn said about the QUIC connections.
    pub quic: QuicStats,
    /// Per-second buckets of the run (bounded).
    pub timeline: Timeline,
    /// Connections opened, by origin (`Origin::index`; those a redirect found after the
    /// scenario's own).
    pub opened_by_origin: Vec<u64>,
    /// Connections the client asked to close whose server kept them open, by origin
    /// index (as `opened_by_origin`).
    pub ignored_close_by_origin: Vec<u64>,
    /// Connections opened by source address (`--local-addr`, by its index), when given.
    pub opened_by_source: Vec<u64>,
    /// The windows in which a hop could not be reached (set by the engine at the end of
    /// a run from its gates; `+=` joins those that overlap).
    pub outages: Vec<crate::record::outage::Outage>,
    /// The restarts seen: connections a server ended at about the same time under
    /// requests (set by the engine at the end of a run; `+=` keeps both lists).
    pub restarts: Vec<crate::record::outage::Restart>,
}

/// Exact count, sum, min and max of durations (ns).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Span {
    pub count: u64,
    pub sum_ns: u128,
    pub min_ns: u64,
    pub max_ns: u64,
}

impl Span {
    pub(crate) fn add(&mut self, ns: u64) {
        self.min_ns = if self.count == 0 {
            ns
        } else {
            self.min_ns.min(ns)
        };
        self.max_ns = self.max_ns.max(ns);
        self.count += 1;
        self.sum_ns += u128::from(ns);
    }

    pub(crate) fn mean_ns(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ns as f64 / self.count as f64
        }
    }
}

impl AddAssign<&Span> for Span {
    fn add_assign(&mut self, o: &Span) {
        if o.count == 0 {
            return;
        }
        self.min_ns = if self.count == 0 {
            o.min_ns
        } else {
            self.min_ns.min(o.min_ns)
        };
        self.max_ns = self.max_ns.max(o.max_ns);
        self.count += o.count;
        self.sum_ns += o.sum_ns;
    }
}

/// TCP connections as the kernel saw them (`TCP_INFO`): after a connect slow enough to
/// have sent its SYN again, and at the close of each HTTP/1.x connection (HTTP/2's
/// sockets are its connection task's).
#[derive(Clone)]
pub(crate) struct TcpStats {
    /// Connects (each checked for a SYN sent again).
    pub connects: u64,
    /// Connects whose SYN was sent again, the SYNs sent again, and those connects' time.
    pub syn_retransmitted: u64,
    pub syn_retransmits: u64,
    pub syn_connect: Span,
    /// Connections read at their close: the least RTT over each one's life (ns), the
    /// smoothed RTT then, the segments sent again (SYNs included) and the connections
    /// with any.
    pub closed: u64,
    pub rtt: PhaseStat,
    pub rtt_at_close: Span,
    pub retransmits: u64,
    pub with_retransmits: u64,
}

impl Default for TcpStats {
    fn default() -> Self {
        TcpStats {
            connects: 0,
            syn_retransmitted: 0,
            syn_retransmits: 0,
            syn_connect: Span::default(),
            closed: 0,
            rtt: PhaseStat::new(),
            rtt_at_close: Span::default(),
            retransmits: 0,
            with_retransmits: 0,
        }
    }
}

impl AddAssign<&TcpStats> for TcpStats {
    fn add_assign(&mut self, o: &TcpStats) {
        self.connects += o.connects;
        self.syn_retransmitted += o.syn_retransmitted;
        self.syn_retransmits += o.syn_retransmits;
        self.syn_connect += &o.syn_connect;
        self.closed += o.closed;
        self.rtt += &o.rtt;
        self.rtt_at_close += &o.rtt_at_close;
        self.retransmits += o.retransmits;
        self.with_retransmits += o.with_retransmits;
    }
}

/// HTTP/3 connections as quinn saw them: handshake times, the path's RTT estimate and
/// loss at each connection's end.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct QuicStats {
    /// First Initial sent to handshake complete, per connection that completed one.
    pub handshake: Span,
    /// 0-RTT requests: how long before the handshake completed the request had left.
    pub early_lead: Span,
    /// The smoothed RTT estimate and the least RTT seen, at each connection's end.
    pub rtt: Span,
    pub min_rtt: Span,
    pub packets_sent: u64,
    pub packets_lost: u64,
    pub bytes_lost: u64,
    pub congestion_events: u64,
    /// Connections that ended (their stats are in the figures above).
    pub connections: u64,
}

impl AddAssign<&QuicStats> for QuicStats {
    fn add_assign(&mut self, o: &QuicStats) {
        self.handshake += &o.handshake;
        self.early_lead += &o.early_lead;
        self.rtt += &o.rtt;
        self.min_rtt += &o.min_rtt;
        self.packets_sent += o.packets_sent;
        self.packets_lost += o.packets_lost;
        self.bytes_lost += o.bytes_lost;
        self.congestion_events += o.congestion_events;
        self.connections += o.connections;
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub(crate) fn new() -> Recorder {
        Recorder {
            phases_new: phase_set(),
            phases_reused: phase_set(),
            counts: Counts::default(),
            errors: [0; ErrorKind::ALL.len()],
            error_details: [0; ErrorDetail::ALL.len()],
            error_examples: std::collections::BTreeMap::new(),
            error_hops: std::collections::BTreeMap::new(),
            status: Box::new([0; STATUS_SLOTS]),
            ok_status: Vec::new(),
            status_examples: std::collections::BTreeMap::new(),
            retry_after_s: None,
            goaway_codes: [0; GOAWAY_SLOTS],
            peak_streams_max: 0,
            server_settings: None,
            keep_alive_header: None,
            close_reasons: [0; CloseReason::ALL.len()],
            local_ports: None,
            rpc_min: u64::MAX,
            rpc_max: 0,
            rpc_buckets: [0; RPC_BOUNDS.len() + 1],
            tcp: TcpStats::default(),
            quic: QuicStats::default(),
            timeline: Timeline::default(),
            opened_by_origin: Vec::new(),
            ignored_close_by_origin: Vec::new(),
            opened_by_source: Vec::new(),
            outages: Vec::new(),
            restarts: Vec::new(),
        }
    }

    /// Requests answered with a status that is not ok (neither 2xx nor 3xx, nor one
    /// `ok_status` accepts).
    pub(crate) fn error_status(&self) -> u64 {
        self.status
            .iter()
            .enumerate()
            .filter(|(code, n)| **n > 0 && !status::is_ok(*code as u16, &self.ok_status))
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests answered with a status that is ok.
    pub(crate) fn ok(&self) -> u64 {
        self.counts.answered - self.error_status()
    }

    /// Count one attempt. Phases are kept for successful attempts only, so failures
    /// (timeouts in particular) do not distort the distributions.
    #[inline]
    pub(crate) fn record(&mut self, r: &RequestRecord) {
        self.counts.attempted += 1;
        self.counts.bytes_received += r.bytes_received;
        self.counts.body_bytes += r.body_bytes;
        if r.stale_retry {
            self.counts.stale_retries += 1;
        }
        if r.refused_retry {
            self.counts.refused_retries += 1;
        }
        if r.late {
            self.counts.late_sends += 1;
        }
        if r.redirected {
            self.counts.redirects += 1;
        }
        match r.outcome {
            Outcome::Ok {
                status,
                retry_after_s,
                ref said,
            } => {
                if retry_after_s.is_some() && matches!(status, 429 | 503) {
                    self.retry_after_s = retry_after_s;
                }
                self.timeline.request_at(
                    r.end,
                    Ended::Answered {
                        latency_ns: r.phases[Phase::Total],
                        ok: status::is_ok(status, &self.ok_status),
                    },
                );
                self.counts.answered += 1;
                self.status[usize::from(status).min(STATUS_SLOTS - 1)] += 1;
                if let Some(m) = said {
                    self.status_examples
                        .entry(status)
                        .or_insert_with(|| m.to_string());
                }
                if r.reused {
                    self.counts.reused_requests += 1;
                }
                let set = if r.reused {
                    &mut self.phases_reused
                } else {
                    &mut self.phases_new
                };
                for (p, stat) in set.iter_mut() {
                    if let Some(ns) = r.phases[p] {
                        stat.record(ns);
                    }
                }
            }
            Outcome::Error(ref f) => {
                self.timeline.request_at(r.end, Ended::Failed(f.kind));
                self.errors[f.kind.index()] += 1;
                if let Some(d) = f.detail {
                    self.error_details[d.index()] += 1;
                }
                if !self.error_examples.contains_key(f.key()) {
                    let m = f.text();
                    self.error_examples.insert(f.key(), m.to_string());
                    if let Some(hop) = &f.hop {
                        self.error_hops.insert(f.key(), (**hop).clone());
                    }
                }
            }
        }
    }

    /// A request in flight when the run's deadline came.
    pub(crate) fn aborted(&mut self) {
        self.counts.aborted_at_deadline += 1;
    }

    /// How a new connection's host name was resolved.
    pub(crate) fn dns(&mut self, how: Resolution) {
        match how {
            Resolution::Lookup => self.counts.dns_lookups += 1,
            Resolution::CacheHit => self.counts.dns_cache_hits += 1,
            Resolution::Joined => self.counts.dns_joined += 1,
        }
    }

    /// A connection went from the `--local-addr` address of this index.
    pub(crate) fn connection_source(&mut self, index: u32) {
        count_at(&mut self.opened_by_source, index);
    }

    /// The client asked to close a connection, and the server of origin `origin` kept
    /// it open.
    pub(crate) fn server_ignored_close(&mut self, origin: u32) {
        self.counts.server_ignored_close += 1;
        count_at(&mut self.ignored_close_by_origin, origin);
    }

    /// A TCP connection was established (the server accepted it).
    pub(crate) fn connection_opened(&mut self, origin: u32) {
        self.counts.connections_opened += 1;
        count_at(&mut self.opened_by_origin, origin);
        self.timeline.connection_opened();
    }

    pub(crate) fn tls_handshake(&mut self, h: TlsHandshake) {
        self.timeline.tls_handshake(h.kind);
        match h.kind {
            HandshakeKind::Full => self.counts.tls_full += 1,
            HandshakeKind::Resumed => self.counts.tls_resumed += 1,
        }
        if h.tls13 {
            self.counts.tls13 += 1;
        }
        if let Some(w) = h.wire {
            if w.client_hellos > 1 {
                self.counts.tls_hello_retries += 1;
            }
            if h.kind == HandshakeKind::Full && w.server_flight_bytes > 0 {
                self.counts.tls_wire_full += 1;
                self.counts.tls_client_hello_bytes += u64::from(w.client_hello_bytes);
                self.counts.tls_server_flight_bytes += w.server_flight_bytes;
            }
        }
        if let Some(g) = h.group {
            let c = &mut self.counts;
            *match KX_GROUPS.iter().position(|(code, _)| *code == g) {
                Some(0) => &mut c.kx_x25519mlkem768,
                Some(1) => &mut c.kx_x25519,
                Some(2) => &mut c.kx_secp256r1,
                Some(3) => &mut c.kx_secp384r1,
                _ => &mut c.kx_other,
            } += 1;
        }
    }

    /// TLS handshakes by key-exchange group name (the first `record::KX_COUNTED` of
    /// `record::KX_GROUPS`, then "other"), the groups seen only.
    pub(crate) fn key_exchange(&self) -> std::collections::BTreeMap<String, u64> {
        let c = &self.counts;
        let counts = [
            c.kx_x25519mlkem768,
            c.kx_x25519,
            c.kx_secp256r1,
            c.kx_secp384r1,
            c.kx_other,
        ];
        KX_GROUPS[..KX_COUNTED]
            .iter()
            .map(|(_, name)| *name)
            .chain(["other"])
            .zip(counts)
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| (name.to_string(), n))
            .collect()
    }

    /// A request went in TLS early data; the server accepted it or not.
    pub(crate) fn early_data(&mut self, accepted: bool) {
        self.counts.early_attempted += 1;
        if accepted {
            self.counts.early_accepted += 1;
        } else {
            self.counts.early_rejected += 1;
        }
    }

    /// A connect that took `connect_ns`, and the kernel's view after it when it was read
    /// (a connect too quick to have sent its SYN again is not).
    pub(crate) fn tcp_connected(&mut self, v: Option<TcpView>, connect_ns: u64) {
        let t = &mut self.tcp;
        t.connects += 1;
        if let Some(v) = v.filter(|v| v.total_retrans > 0) {
            t.syn_retransmitted += 1;
            t.syn_retransmits += u64::from(v.total_retrans);
            t.syn_connect.add(connect_ns);
        }
    }

    /// A server's first flight over TCP read from its first byte to its last over
    /// `spread_ns`, after a connect of `connect_ns` (on a link of 5 ms or more, a round
    /// trip): the round trips in it are the flight waiting for the client's ACKs (a
    /// server's CPU before it, a slow signature, does not count).
    pub(crate) fn tls_flight(&mut self, spread_ns: u64, connect_ns: u64) {
        self.counts.tls_flight_waits += extra_round_trips(spread_ns, connect_ns, 0);
    }

    /// A QUIC handshake that took `ns` at quinn's RTT estimate `rtt_ns` (it needs one).
    pub(crate) fn quic_timed(&mut self, ns: u64, rtt_ns: u64) {
        self.counts.quic_flight_waits += extra_round_trips(ns, rtt_ns, 1);
    }

    /// The kernel's view of a connection as it closes.
    pub(crate) fn tcp_closed(&mut self, v: TcpView) {
        let t = &mut self.tcp;
        t.closed += 1;
        t.rtt_at_close.add(u64::from(v.rtt_us) * 1000);
        if v.min_rtt_us > 0 {
            t.rtt.record(u64::from(v.min_rtt_us) * 1000);
        }
        t.retransmits += u64::from(v.total_retrans);
        if v.total_retrans > 0 {
            t.with_retransmits += 1;
        }
    }

    /// A connection ended after carrying `requests` responses.
    pub(crate) fn connection_closed(&mut self, reason: CloseReason, requests: u64) {
        self.timeline.connection_closed(reason);
        self.close_reasons[reason.index()] += 1;
        self.counts.connections_closed += 1;
        self.rpc_min = self.rpc_min.min(requests);
        self.rpc_max = self.rpc_max.max(requests);
        self.counts.rpc_sum += requests;
        let slot = RPC_BOUNDS
            .iter()
            .position(|b| requests <= *b)
            .unwrap_or(RPC_BOUNDS.len());
        self.rpc_buckets[slot] += 1;
        if reason == CloseReason::ServerMaxRequests {
            self.counts.rpc_sum_server_max_requests += requests;
        }
    }

    /// An HTTP/2 connection ended: the most streams it carried at once, and the code of
    /// the GOAWAY that ended it, if one did.
    pub(crate) fn h2_connection_ended(&mut self, peak_streams: u64, goaway_code: Option<u32>) {
        self.peak_streams_max = self.peak_streams_max.max(peak_streams);
        self.counts.peak_streams_sum += peak_streams;
        if let Some(code) = goaway_code {
            self.goaway_codes[(code as usize).min(GOAWAY_SLOTS - 1)] += 1;
        }
    }

    pub(crate) fn errors_total(&self) -> u64 {
        self.errors.iter().sum()
    }
}

impl Recorder {
    /// Add `o`, a later run of the same scenario (compare's next round), its timeline
    /// laid after this one's first `offset`.
    pub(crate) fn add_after(&mut self, o: &Recorder, offset: std::time::Duration) {
        let mine = std::mem::take(&mut self.timeline);
        *self += o;
        self.timeline = mine;
        self.timeline.append(&o.timeline, offset);
    }
}

impl AddAssign<&Recorder> for Recorder {
    fn add_assign(&mut self, o: &Recorder) {
        self.timeline += &o.timeline;
        crate::record::outage::merge(&mut self.outages, &o.outages);
        self.restarts.extend(o.restarts.iter().cloned());
        self.restarts.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        if o.opened_by_origin.len() > self.opened_by_origin.len() {
            self.opened_by_origin.resize(o.opened_by_origin.len(), 0);
        }
        for (a, b) in self.opened_by_origin.iter_mut().zip(&o.opened_by_origin) {
            *a += b;
        }
        add_by_index(&mut self.opened_by_source, &o.opened_by_source);
        add_by_index(
            &mut self.ignored_close_by_origin,
            &o.ignored_close_by_origin,
        );
        for (p, a) in self.phases_new.iter_mut() {
            *a += &o.phases_new[p];
        }
        for (p, a) in self.phases_reused.iter_mut() {
            *a += &o.phases_reused[p];
        }
        self.counts += &o.counts;
        for (a, b) in self.error_details.iter_mut().zip(o.error_details.iter()) {
            *a += b;
        }
        for (a, b) in self.errors.iter_mut().zip(o.errors.iter()) {
            *a += b;
        }
        for (k, m) in &o.error_examples {
            if !self.error_examples.contains_key(k) {
                self.error_examples.insert(k, m.clone());
                if let Some(hop) = o.error_hops.get(k) {
                    self.error_hops.insert(k, hop.clone());
                }
            }
        }
        for (k, m) in &o.status_examples {
            self.status_examples.entry(*k).or_insert_with(|| m.clone());
        }
        for (a, b) in self.status.iter_mut().zip(o.status.iter()) {
            *a += b;
        }
        if self.ok_status.is_empty() {
            self.ok_status.clone_from(&o.ok_status);
        }
        self.retry_after_s = self.retry_after_s.max(o.retry_after_s);
        for (a, b) in self.goaway_codes.iter_mut().zip(o.goaway_codes.iter()) {
            *a += b;
        }
        self.peak_streams_max = self.peak_streams_max.max(o.peak_streams_max);
        if self.keep_alive_header.is_none() {
            self.keep_alive_header = o.keep_alive_header;
        }
        if self.server_settings.is_none() {
            self.server_settings = o.server_settings;
        }
        if self.local_ports.is_none() {
            self.local_ports = o.local_ports;
        }
        for (a, b) in self.close_reasons.iter_mut().zip(o.close_reasons.iter()) {
            *a += b;
        }
        self.rpc_min = self.rpc_min.min(o.rpc_min);
        self.rpc_max = self.rpc_max.max(o.rpc_max);
        for (a, b) in self.rpc_buckets.iter_mut().zip(o.rpc_buckets.iter()) {
            *a += b;
        }
        self.tcp += &o.tcp;
        self.quic += &o.quic;
    }
}

/// Add counts kept by index (`b` into `a`, which grows to `b`'s length).
/// One more at index `i` of counts by index (an origin, a source address).
fn count_at(counts: &mut Vec<u64>, i: u32) {
    let i = i as usize;
    if i >= counts.len() {
        counts.resize(i + 1, 0);
    }
    counts[i] += 1;
}

fn add_by_index(a: &mut Vec<u64>, b: &[u64]) {
    if b.len() > a.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}
