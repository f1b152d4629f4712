//! `watch`'s report: audit's figures from the outside, per server endpoint and in total,
//! with the same JSON keys where the meaning is the same (`total.connections`,
//! `total.requests`, `total.tls_handshakes.full/resumed`, `reuse_ratio`,
//! `requests_per_connection`, `idle_gaps`), and a verdict.

use std::collections::BTreeMap;

use serde::Serialize;

use super::audit::{GapStats, RpcStats, TlsCounts};

#[derive(Debug, Clone, Serialize, Default)]
pub(crate) struct Spread {
    /// How many: the connections that ended (0: none did, and the figures are 0).
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub max: f64,
}

/// The figures of a set of connections (one server endpoint's, or all).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EndpointSummary {
    /// The server's address and port, or "all".
    pub endpoint: String,
    pub connections: u64,
    /// Connections that were open when the watch started (their earlier requests were
    /// not seen).
    pub already_open: u64,
    /// Requests answered (an answer began). Cleartext HTTP/1: request heads seen; TLS:
    /// bursts of application data from the client, an estimate (`requests_estimated`).
    pub requests: u64,
    /// Requests sent that got no answer on their connection: sent on one the server was
    /// closing or had reset (clients then send them again on a new one), or cut off.
    pub unanswered_requests: u64,
    pub responses: u64,
    /// Cleartext HTTP/1: the responses by status code ("200", "400").
    pub status_codes: BTreeMap<String, u64>,
    /// Some requests are estimates (TLS connections).
    pub requests_estimated: bool,
    pub requests_per_connection: RpcStats,
    /// Requests that did not open their connection / all requests.
    pub reuse_ratio: f64,
    /// Connections by what they carried: http, tls, other, unknown (no data).
    pub kinds: BTreeMap<String, u64>,
    pub tls_handshakes: TlsCounts,
    /// Server names (SNI), TLS versions and ALPN protocols the handshakes named.
    pub tls_sni: BTreeMap<String, u64>,
    pub tls_versions: BTreeMap<String, u64>,
    pub tls_alpn: BTreeMap<String, u64>,
    /// The ALPN protocols clients offered (TLS 1.3 hides the server's choice).
    pub tls_alpn_offered: BTreeMap<String, u64>,
    /// Who closed first, and how: client_fin, server_fin, client_reset, server_reset,
    /// server_idle (the server's FIN after 1 s or more without an exchange: its
    /// keep-alive timeout), open_at_end.
    pub endings: BTreeMap<String, u64>,
    /// Sockets of these connections in TIME_WAIT when the watch ended, by the side that
    /// holds them (the side that closed first).
    pub time_wait: BTreeMap<String, u64>,
    /// Connections that ended, from the first packet seen to the last: ms.
    pub lifetimes_ms: Spread,
    pub idle_gaps: GapStats,
    pub unused_connections: u64,
    /// Connections whose client's last request asked to close them, read from cleartext
    /// HTTP/1 heads: `http10_without_keep_alive`, `connection_close`.
    pub client_asked_close: BTreeMap<String, u64>,
    /// Connections by the `User-Agent` of their first cleartext HTTP/1 request head that
    /// had one (the first 80 bytes; 64 agents at most): what names a Go or Java client.
    pub user_agents: BTreeMap<String, u64>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Watching an endpoint: one client program's connections (a population of its own,
/// judged on its own).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProgramSummary {
    /// The client program's name (the kernel's name of the process that connected), or
    /// `unknown`: a client on another machine, or one gone before it was looked up.
    pub program: String,
    /// The addresses its connections came from.
    pub clients: Vec<String>,
    /// Its figures (`endpoint` is "all": every endpoint watched).
    #[serde(flatten)]
    pub figures: EndpointSummary,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct CaptureReport {
    /// Packets the capture's filter passed (TCP), and of them those the kernel dropped
    /// for want of buffer room: connections or requests in them were not seen.
    pub packets: u64,
    pub kernel_drops: u64,
    /// TCP segments read.
    pub segments: u64,
    /// Watching a process: how its connections were told from others'. "cgroup": in the
    /// kernel, as each was opened (none missed); "sockets": by looking up each socket's
    /// owner in /proc after its SYN was seen (a connection shorter than the lookup can be
    /// missed), with why the cgroup way was not open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribution: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribution_note: Option<String>,
    /// Connections the kernel could not record for the watch (its record was full).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribution_lost: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Watched {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub duration_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct WatchReport {
    pub schema_version: u32,
    pub tool: &'static str,
    pub version: &'static str,
    pub watched: Watched,
    pub exit_status: Option<i32>,
    pub capture: CaptureReport,
    /// The most connections open at once: from the SYN (or first packet seen) to the
    /// first FIN or RST. Watching a program, its own: exact with the kernel's record,
    /// else sampled from its established sockets every 10 ms.
    pub peak_concurrent_connections: u64,
    pub total: EndpointSummary,
    pub endpoints: Vec<EndpointSummary>,
    /// Watching an endpoint: each client program's figures, by name (the verdict judges
    /// each apart; the headline names each when there were several).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<ProgramSummary>,
    /// Watching a process: connections seen on this machine that were not its (not in
    /// the figures above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_connections: Option<u64>,
    /// Ctrl-C ended it (exit status 130): what the report covers (code `interrupted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<super::finding::Finding>,
    /// The verdict in one sentence: requests over connections, reused or not, and who
    /// closed them.
    pub headline: super::finding::Finding,
    pub verdict: Vec<super::finding::Finding>,
}
