//! The versioned report (serde) and its renderers: human text and JSON.
//! Only this layer (and `main`) prints.

pub(crate) mod audit;
pub(crate) mod cause;
pub(crate) mod comparison;
pub(crate) mod doctor;
pub(crate) mod failure;
pub(crate) mod finding;
pub(crate) mod fixes;
pub(crate) mod html;
pub(crate) mod knee;
pub(crate) mod link;
pub(crate) mod raw;
pub(crate) mod reuse;
mod run;
pub(crate) mod server;
pub(crate) mod text;
pub(crate) mod thresholds;
pub(crate) mod trace;
pub(crate) mod watch;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::{Phase, PhaseMap};
pub(crate) use run::{AgentReport, Machine, RunInfo, Segment};

pub(crate) const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    pub schema_version: u32,
    pub tool: &'static str,
    pub version: &'static str,
    pub scenarios: Vec<ScenarioReport>,
    /// Counts of the embedded server, when the run started it (ground truth).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<server::StatsSnapshot>,
    /// Which report this is, with what only that kind has.
    #[serde(flatten)]
    pub kind: Kind,
    /// With `--rtt`: the emulated link the run crossed, as set and as measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<link::LinkReport>,
    /// `--fail-if`: each expression checked on each scenario.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Vec<thresholds::ThresholdResult>>,
    /// Who ran it, when, on which host, and which share of the workload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunInfo>,
    /// Ctrl-C cut the run short: what the report covers (exit status 130).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<finding::Finding>,
}

/// How a report is written and judged: `--json`, `--html`, compare's `-v`, `--fail-if`
/// and `--ok-status`, resolved before the run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Output {
    pub json: bool,
    pub html: Option<std::path::PathBuf>,
    /// compare's `-v`: why each row costs what it costs.
    pub verbose: bool,
    pub thresholds: Vec<thresholds::Threshold>,
    /// The statuses `--ok-status` counts as successes beside 2xx and 3xx (none without it).
    pub accepted: Vec<(u16, u16)>,
}

/// Which report a [`Report`] is. In the JSON each kind's own part is a key of the report
/// itself (`comparison`, `rtt_sweep`, `concurrency_sweep`, `agents`), as it always was;
/// bench's report has none of them.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub(crate) enum Kind {
    /// `bench`: its scenarios.
    Bench {},
    /// `merge`: the agents' runs merged, one row per agent.
    Merged {
        agents: Vec<AgentReport>,
        /// The shares of the workload no agent ran (`segments_missing`): empty where the
        /// agents cover it whole.
        coverage: Vec<finding::Finding>,
    },
    /// `compare`: the strategies side by side.
    Comparison { comparison: comparison::Comparison },
    /// `compare --rtt A,B,...`: the comparison at each round-trip time.
    RttSweep { rtt_sweep: comparison::RttSweep },
    /// `compare -c 1,10,50,...`: the comparison at each concurrency and the knee.
    ConcurrencySweep {
        concurrency_sweep: knee::ConcurrencySweep,
    },
}

impl Report {
    /// The comparisons: compare's one, or one per RTT of a sweep.
    pub(crate) fn comparisons(&self) -> Vec<&comparison::Comparison> {
        match &self.kind {
            Kind::Bench {} | Kind::Merged { .. } => Vec::new(),
            Kind::Comparison { comparison } => vec![comparison],
            Kind::RttSweep { rtt_sweep } => {
                rtt_sweep.points.iter().map(|p| &p.comparison).collect()
            }
            Kind::ConcurrencySweep { concurrency_sweep } => concurrency_sweep
                .steps
                .iter()
                .map(|p| &p.comparison)
                .collect(),
        }
    }

    /// The URLs of the report's scenarios, each once, in order.
    pub(crate) fn urls(&self) -> Vec<String> {
        let mut urls: Vec<String> = Vec::new();
        for s in &self.scenarios {
            if !urls.contains(&s.url) {
                urls.push(s.url.clone());
            }
        }
        urls
    }

    pub(crate) fn new(kind: Kind, scenarios: Vec<ScenarioReport>) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            tool: "handshake",
            version: env!("CARGO_PKG_VERSION"),
            scenarios,
            server: None,
            kind,
            link: None,
            thresholds: None,
            run: None,
            interrupted: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ScenarioReport {
    pub name: String,
    pub url: String,
    /// How many URLs the scenario cycles through (`--urls-from-file`).
    pub urls: usize,
    pub strategy: String,
    /// The protocol on the wire: `http/1.1`, `http/1.0`, `h2`.
    pub protocol: String,
    pub concurrency: usize,
    pub threads: usize,
    pub duration_s: f64,
    pub load: LoadReport,
    pub requests: RequestsReport,
    pub connections: ConnectionsReport,
    pub throughput: ThroughputReport,
    pub latency_ms: LatencyReport,
    pub phases_ms: PhasesReport,
    pub cpu: CpuReport,
    pub dns: DnsReport,
    /// Present when connects found no free local port: the client's ports at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_ports: Option<LocalPortsReport>,
    /// What the run measured in one sentence; or, when a finding explains the run (most
    /// attempts failed, most responses were errors, the strategy's feature never
    /// happened), that finding first. Absent when no request succeeded.
    pub headline: Option<finding::Finding>,
    /// Why reuse did not happen and what went wrong: findings in the order of their
    /// causes, each with its evidence.
    pub diagnosis: Vec<finding::Finding>,
    /// What happened second by second (compare: the strategy's rounds end to end).
    pub timeline: Vec<TimelineBucket>,
    /// The windows in which the target (or its proxy, or its resolver) could not be
    /// reached, and what they cost.
    pub outages: OutagesReport,
    /// The scenario losslessly: its shape, every counter and every histogram (HdrHistogram
    /// V2, base64), from which `merge` rebuilds it exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<raw::RawScenario>,
}

impl ScenarioReport {
    /// Time per request (compare's figure): concurrency × wall time ÷ answered requests,
    /// in ms, so it counts what each request waited for, setup included. With nothing
    /// answered, the whole wall time of every worker (the row ranks last).
    pub(crate) fn time_per_request_ms(&self) -> f64 {
        self.concurrency as f64 * self.duration_s * 1000.0 / self.requests.answered.max(1) as f64
    }
}

/// The windows in which a hop could not be reached: how many, the longest, all of them
/// together, and the requests they cost (their failed connects and the requests in
/// flight that failed).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct OutagesReport {
    pub count: usize,
    pub longest_ms: f64,
    pub total_ms: f64,
    pub requests_lost: u64,
    pub windows: Vec<crate::record::outage::Outage>,
    /// Restarts seen: connections the server ended at about the same time under
    /// requests, told graceful (none failed) or hard (requests in flight failed).
    pub restarts: Vec<crate::record::outage::Restart>,
}

impl OutagesReport {
    pub(crate) fn new(
        windows: &[crate::record::outage::Outage],
        restarts: &[crate::record::outage::Restart],
    ) -> OutagesReport {
        OutagesReport {
            count: windows.len(),
            longest_ms: windows
                .iter()
                .map(|w| w.duration_s * 1e3)
                .fold(0.0, f64::max),
            total_ms: windows
                .iter()
                .map(|w| w.duration_s * 1e3)
                .fold(0.0, |a, b| a + b),
            requests_lost: windows.iter().map(|w| w.requests_lost()).sum(),
            windows: windows.to_vec(),
            restarts: restarts.to_vec(),
        }
    }
}

/// One bucket of the timeline: `width_s` seconds from `t_s` after the run's start (1 s,
/// doubling past an hour so that a run keeps at most 3600; the last one ends with the
/// run).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TimelineBucket {
    pub t_s: f64,
    pub width_s: f64,
    /// Attempts that ended in it: answered with an ok status, answered with an error
    /// status, and failed without an answer.
    pub requests: u64,
    pub ok: u64,
    pub error_status: u64,
    pub errors: u64,
    /// The failed ones by category (non-zero only).
    pub errors_by_kind: BTreeMap<String, u64>,
    pub new_connections: u64,
    pub closed_connections: u64,
    /// The closed ones by reason (non-zero only).
    pub close_reasons: BTreeMap<String, u64>,
    pub tls_full: u64,
    pub tls_resumed: u64,
    /// Latency of the bucket's ok requests (to within ~6 %); null without any.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
}

/// How new connections got their addresses (origins given as IP addresses or with
/// `--resolve` need none and count in none of these).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DnsReport {
    /// `on`: answers kept for their TTL and shared by the run's connections; `off`.
    pub cache: &'static str,
    /// Lookups sent to the resolver (/etc/hosts, then the name servers).
    pub lookups: u64,
    /// New connections that found a valid answer in the cache (no `dns` phase).
    pub cache_hits: u64,
    /// New connections that waited for a lookup another connection had started (their
    /// `dns` phase is the wait).
    pub joined: u64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct LocalPortsReport {
    /// TCP sockets in TIME_WAIT (this network namespace).
    pub time_wait: Option<u64>,
    /// `net.ipv4.ip_local_port_range`, inclusive.
    pub port_range: Option<[u32; 2]>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct LoadReport {
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    pub rate: Option<f64>,
    pub timeout_s: f64,
    pub requests_per_connection: Option<u64>,
    /// `--connect-rate`: new TCP connections per second at most.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_rate: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct RequestsReport {
    pub attempted: u64,
    /// Answered with a status counted as ok: 2xx, 3xx, or one `--ok-status` accepts.
    pub ok: u64,
    /// Answered with another status (`attempted` = `ok` + `error_status` + the errors).
    pub error_status: u64,
    /// Answered, whatever the status (`ok` + `error_status`): the population of the
    /// latency and phase figures.
    pub answered: u64,
    pub errors: BTreeMap<String, u64>,
    /// Errors by sub-reason (`reset_in_body`, `cert_expired`, ...): non-zero entries only.
    pub error_details: BTreeMap<String, u64>,
    /// One full message per detail (or category, without a detail): the first seen.
    pub error_examples: BTreeMap<String, String>,
    /// Where the example of an error was met, when it was on the way to a hop other
    /// than the URL's host and port: `via` (`connect_to`, `resolve`, `unix_socket`,
    /// `redirect`), the `address` tried, the `origin` it was for.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_hops: BTreeMap<String, crate::record::Hop>,
    pub retries: RetriesReport,
    pub status_codes: BTreeMap<String, u64>,
    /// What the first 3xx/4xx/5xx response of each status said: its status line, and
    /// a redirect's Location or an error's first body bytes (HTTP/1).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub status_examples: BTreeMap<String, String>,
    /// Responses by status class: `1xx` to `5xx`, each always present.
    pub status_classes: BTreeMap<String, u64>,
    /// Responses whose status was not 2xx (3xx among them, which count as ok).
    pub non_2xx: u64,
    /// The `Retry-After` (seconds) of a 429 or 503 response, when one carried it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u32>,
    /// Requests in flight when `-d` ended: not in `attempted`, not lost.
    pub aborted_at_deadline: u64,
    /// Open loop: sends that started 2 ms or more after their intended time.
    pub late_sends: u64,
    /// `-L`: responses that were redirects and were followed (each hop a request of its
    /// own, in `attempted` and `ok`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirects: Option<u64>,
}

impl RequestsReport {
    /// Answers that ended a request: with `-L` a followed redirect is a hop on the way,
    /// not an answer of its own.
    pub(crate) fn final_answers(&self) -> u64 {
        self.answered.saturating_sub(self.redirects.unwrap_or(0))
    }

    /// Of those, the successes (2xx, 3xx not followed, or a status `--ok-status` accepts).
    pub(crate) fn final_ok(&self) -> u64 {
        self.ok.saturating_sub(self.redirects.unwrap_or(0))
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct RetriesReport {
    pub stale_connection: u64,
    /// HTTP/2: requests sent again on another connection after the server refused the
    /// stream (REFUSED_STREAM, or above a GOAWAY's last stream id).
    pub refused_stream: u64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ConnectionsReport {
    pub opened: u64,
    pub reused_requests: u64,
    pub reuse_ratio: f64,
    pub tls_handshakes: TlsHandshakes,
    pub close_reasons: BTreeMap<String, u64>,
    pub requests_per_connection: RpcReport,
    /// Connections the client closed itself because the server kept them open after
    /// the client asked to close.
    pub server_ignored_close: u64,
    /// TLS 1.3 early data (0-RTT): requests sent in it; the server accepted them or
    /// rejected them (then they were sent again after the handshake).
    pub early_data: EarlyDataReport,
    /// HTTP/2 only: streams and the server's SETTINGS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h2: Option<H2Report>,
    /// HTTP/3 only: what quinn said about the QUIC connections.
    /// TCP: the kernel's view of the connections (Linux `TCP_INFO`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicReport>,
    /// Through a forward proxy: `opened` counts connections to the proxy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyReport>,
    /// `-L`: connections opened by origin (`http://host:port`), those redirects led to
    /// included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_origin: Option<BTreeMap<String, u64>>,
    /// `--local-addr`: connections opened from each source address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_source_address: Option<BTreeMap<String, u64>>,
    /// HTTP/1: what the server's `Keep-Alive` header announced (its idle timeout in s,
    /// the requests it still takes), on the first connection's first response that had
    /// one; absent where none did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_alive_header: Option<crate::record::KeepAliveHeader>,
}

/// The forward proxy between the client and the origins.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProxyReport {
    /// Scheme, host and port (never its credentials).
    pub url: String,
    /// `CONNECT` tunnels the proxy opened (to https:// origins; one per connection).
    pub tunnels: u64,
}

/// TCP connections as the kernel saw them (Linux `TCP_INFO`): after a connect slow
/// enough to have sent its SYN again, and at the close of each HTTP/1.x connection.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct KernelReport {
    /// Connects, each checked for a SYN sent again (read when it took 100 ms or more:
    /// a quicker one cannot have waited the kernel's retransmission timeout).
    pub connects: u64,
    /// Connects whose SYN was sent again (it or its answer was lost: the kernel waited
    /// its retransmission timeout, 1 s at first, then 2 s, 4 s...), and the SYNs sent
    /// again.
    pub syn_retransmitted: u64,
    pub syn_retransmits: u64,
    /// Those connects' time (absent without any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syn_retransmitted_connect_ms: Option<Spread>,
    /// HTTP/1.x connections read at their close (HTTP/2's sockets are its own).
    pub closed: u64,
    /// The least RTT the kernel saw over each one's life: the network's round trip,
    /// beside the connect phase (which also holds CPU and, under load, the accept queue).
    pub min_rtt_ms: PhaseSummary,
    /// The smoothed RTT at their close.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_at_close_ms: Option<Spread>,
    /// Segments sent again over those connections' lives (their SYNs' included), and
    /// the connections with any.
    pub retransmits: u64,
    pub connections_with_retransmits: u64,
}

/// HTTP/3's QUIC connections, from quinn's own figures. The handshakes' kinds (full or
/// resumed) are `tls_handshakes`: QUIC carries TLS 1.3.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct QuicReport {
    /// Strategy `h3`: shared connections per origin (per-request strategies: absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections_per_origin: Option<usize>,
    /// Strategy `h3`: the most streams one connection carried at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_concurrent_streams: Option<PeakReport>,
    /// First Initial sent to the handshake complete, over the connections that
    /// completed one.
    pub handshake_ms: Spread,
    /// 0-RTT requests the server took: how long before the handshake completed each had
    /// left (absent without any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_request_lead_ms: Option<Spread>,
    /// quinn's smoothed RTT estimate at each connection's end.
    pub rtt_ms: Spread,
    /// Over the connections that ended: packets sent, declared lost, their bytes, and
    /// congestion events.
    pub packets_sent: u64,
    pub packets_lost: u64,
    pub bytes_lost: u64,
    pub congestion_events: u64,
    /// Connections whose figures are above.
    pub connections_ended: u64,
    /// Round trips the handshakes took beyond their one (each rounded at quinn's RTT
    /// estimate, where it is 5 ms or more): the server's first flight waited for the
    /// client, above the anti-amplification limit (3 times what the client had sent).
    pub handshake_extra_round_trips: u64,
}

/// count, min, mean and max of a duration, in ms.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Spread {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct EarlyDataReport {
    pub attempted: u64,
    pub accepted: u64,
    pub rejected: u64,
}

/// What HTTP/2 connections carried. `requests_per_connection` above counts the streams
/// each connection completed.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct H2Report {
    /// `--connections`: connections per origin the workers share.
    pub connections_per_origin: usize,
    /// The most streams in flight at once on one connection: the highest and the mean
    /// over the connections.
    pub peak_concurrent_streams: PeakReport,
    /// The SETTINGS of the server (values it sent; absent ones take the protocol's
    /// defaults), from the first connection.
    pub server_settings: Option<crate::record::ServerSettings>,
    /// Connections ended by a GOAWAY, by its error code (`no_error`, ...).
    pub goaway_codes: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct PeakReport {
    pub max: u64,
    pub mean: f64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct TlsHandshakes {
    pub full: u64,
    pub resumed: u64,
    /// Handshakes that negotiated TLS 1.3 (the others, 1.2).
    pub tls13: u64,
    /// Handshakes by the key-exchange group they agreed on (QUIC's are not known).
    pub key_exchange: std::collections::BTreeMap<String, u64>,
    /// Handshakes over TCP in which the server answered the ClientHello with a
    /// HelloRetryRequest (one more round trip).
    pub hello_retry_requests: u64,
    /// Over the full handshakes over TCP: the mean size of the first ClientHello (its
    /// TLS record), and of what the server sent before the client's next flight (its
    /// first flight, certificate chain included), in bytes.
    pub client_hello_bytes: Option<f64>,
    pub server_flight_bytes: Option<f64>,
    /// Round trips the server's first flight waited over TCP: from its first byte read to
    /// its last, in the connect's time (a round trip; rounded, where it is 5 ms or more),
    /// above the initial congestion window (~10 segments).
    pub first_flight_extra_round_trips: u64,
    /// Mutual TLS: the servers' requests for a client certificate and the client's
    /// answers (absent when no server asked and no `--cert` was given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<raw::ClientCertificate>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct RpcReport {
    pub min: u64,
    pub mean: f64,
    pub max: u64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ThroughputReport {
    pub requests_per_s: f64,
    pub bytes_received: u64,
    pub body_bytes_received: u64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct LatencyReport {
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    /// The distribution: `[percentile, ms]` pairs from 0 to 100.
    pub percentiles: Vec<[f64; 2]>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct PhasesReport {
    pub new: PhaseGroup,
    pub reused: PhaseGroup,
    /// Where a mean successful request's time goes: each phase's total over all ok
    /// requests (new and reused) divided by their number.
    pub mean_per_request: PhaseMeans,
}

/// Where a mean successful request's time goes: each phase's total over all ok requests
/// (new and reused) divided by their number, in ms; every phase but `total`.
#[derive(Debug, Clone, Default)]
pub(crate) struct PhaseMeans(pub PhaseMap<f64>);

impl PhaseMeans {
    /// (name, ms) in phase order, without `blocked` (the page's bars).
    pub(crate) fn parts(&self) -> Vec<(&'static str, f64)> {
        Phase::parts()
            .filter(|p| *p != Phase::Blocked)
            .map(|p| (p.name(), self.0[p]))
            .collect()
    }
}

impl Serialize for PhaseMeans {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        for p in Phase::parts() {
            m.serialize_entry(p.name(), &self.0[p])?;
        }
        m.end()
    }
}

/// One summary per phase, in the order of docs/timing.md ("Phases of one attempt"),
/// after the number of requests they cover.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PhaseGroup {
    pub requests: u64,
    #[serde(flatten)]
    pub phases: PhaseMap<PhaseSummary>,
}

impl PhaseGroup {
    /// What setting up a connection took a mean request of the group, in ms: each setup
    /// phase's time summed over the requests that had it, over all the group's requests
    /// (a lookup that 2 of 200 waited for counts 2/200). 0 for a group of none.
    pub(crate) fn setup_mean_ms(&self) -> f64 {
        if self.requests == 0 {
            return 0.0;
        }
        let sum: f64 = self
            .phases
            .of(Phase::SETUP)
            .map(|p| p.mean * p.count as f64)
            .sum();
        sum / self.requests as f64
    }
}

impl std::ops::Index<Phase> for PhaseGroup {
    type Output = PhaseSummary;

    fn index(&self, p: Phase) -> &PhaseSummary {
        &self.phases[p]
    }
}

#[derive(Debug, Clone, Serialize, Default)]
pub(crate) struct PhaseSummary {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct CpuReport {
    pub client_user_s: f64,
    pub client_sys_s: f64,
    /// Client CPU (user + sys of its worker threads) per attempted request, in µs.
    pub client_us_per_request: f64,
}

pub(crate) fn to_json(report: &Report) -> String {
    serde_json::to_string_pretty(report).expect("report serializes")
}
