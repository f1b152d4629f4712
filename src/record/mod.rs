//! What one attempt and one connection produce: phase durations, outcome, close reason.
//! These are the words of docs/timing.md (phases and counters); every layer above uses them.

mod failure;
mod keep_alive;
pub(crate) mod notes;
pub(crate) mod outage;
mod phase;
pub(crate) mod status;

pub(crate) use failure::{ErrorDetail, ErrorKind, Failure, Hop, Via};
pub(crate) use keep_alive::KeepAliveHeader;
pub(crate) use phase::{Phase, PhaseMap};

use std::time::Instant;

use serde::{Deserialize, Serialize};

/// Nanoseconds from `from` to `to` (zero if `to` is earlier): how a phase is stored.
#[inline]
pub(crate) fn ns(from: Instant, to: Instant) -> u64 {
    to.saturating_duration_since(from).as_nanos() as u64
}

/// The phases of one attempt, in nanoseconds. `None` means the phase did not happen.
pub(crate) type Phases = PhaseMap<Option<u64>>;

/// Why a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CloseReason {
    /// The client's strategy ended it (keep-alive off, or `--requests-per-connection`).
    ClientPolicy,
    /// The server sent `Connection: close` on the first response of the connection.
    ServerCloseHeader,
    /// A 1.0 response without keep-alive (and without `Connection: close`, which
    /// says the server's keep-alive is off: `ServerCloseHeader`).
    ServerHttp10,
    /// The response's body had no length and was not chunked: it ended with the
    /// server's close (RFC 9112 6.3), without any `Connection: close`.
    ServerCloseDelimited,
    /// EOF or reset while the connection was idle (found on the next request).
    ServerIdleClose,
    /// The server sent `Connection: close` after more than one request: its limit.
    ServerMaxRequests,
    /// HTTP/2: the server sent GOAWAY (its limit, its idle timeout, or an error; the
    /// codes are counted apart).
    ServerGoaway,
    /// The connection ended in an error.
    Error,
    /// Still open when the run ended.
    EndOfRun,
}

impl CloseReason {
    pub(crate) const ALL: [CloseReason; 9] = [
        CloseReason::ClientPolicy,
        CloseReason::ServerCloseHeader,
        CloseReason::ServerHttp10,
        CloseReason::ServerCloseDelimited,
        CloseReason::ServerIdleClose,
        CloseReason::ServerMaxRequests,
        CloseReason::ServerGoaway,
        CloseReason::Error,
        CloseReason::EndOfRun,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            CloseReason::ClientPolicy => "client_policy",
            CloseReason::ServerCloseHeader => "server_close_header",
            CloseReason::ServerHttp10 => "server_http10",
            CloseReason::ServerCloseDelimited => "server_close_delimited",
            CloseReason::ServerIdleClose => "server_idle_close",
            CloseReason::ServerMaxRequests => "server_max_requests",
            CloseReason::ServerGoaway => "server_goaway",
            CloseReason::Error => "error",
            CloseReason::EndOfRun => "end_of_run",
        }
    }

    pub(crate) fn index(self) -> usize {
        CloseReason::ALL
            .iter()
            .position(|k| *k == self)
            .unwrap_or(0)
    }
}

/// Whether a TLS handshake was full or resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandshakeKind {
    Full,
    Resumed,
}

/// A finished TLS handshake: full or resumed, TLS 1.3 or not, and the key-exchange group
/// it agreed on (its IANA code point; none where the library does not say: QUIC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TlsHandshake {
    pub kind: HandshakeKind,
    pub tls13: bool,
    pub group: Option<u16>,
    /// What it put on the wire (TLS over TCP).
    pub wire: Option<Wire>,
}

/// What a TLS handshake over TCP put on the wire (read by `net::tap`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Wire {
    /// ClientHellos sent: 2 when the server answered the first with a HelloRetryRequest.
    pub client_hellos: u32,
    /// The first ClientHello's TLS record, its header included.
    pub client_hello_bytes: u32,
    /// What the server sent after the (last) ClientHello, before the client's next
    /// flight: its first flight, certificate chain included. 0: not known (early data).
    pub server_flight_bytes: u64,
    /// From its first byte read to its last (ns): a round trip or more when part of it
    /// waited for the client's ACKs (above the initial congestion window).
    pub server_flight_spread_ns: u64,
}

/// The key-exchange groups by IANA code point and name, as reports name them. Runs
/// count the first [`KX_COUNTED`] by name (the `kx_*` counters, in this order) and any
/// other as "other".
pub(crate) const KX_GROUPS: [(u16, &str); 7] = [
    (0x11ec, "X25519MLKEM768"),
    (0x001d, "x25519"),
    (0x0017, "secp256r1"),
    (0x0018, "secp384r1"),
    (0x11eb, "SecP256r1MLKEM768"),
    (0x0201, "MLKEM768"),
    (0x0202, "MLKEM1024"),
];
pub(crate) const KX_COUNTED: usize = 4;

/// A group's name in reports, from its code point (`KX_GROUPS`, else the number).
pub(crate) fn kx_group_name(code: u16) -> String {
    KX_GROUPS
        .iter()
        .find(|(c, _)| *c == code)
        .map_or_else(|| format!("group 0x{code:04x}"), |(_, n)| (*n).to_string())
}

/// The result of one attempt (after any stale-connection retry).
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// Answered, whatever the status; `retry_after_s`: a 429 or 503's `Retry-After` in
    /// seconds, when it sent one; `said`: what a 3xx, 4xx or 5xx response said
    /// ([`notes::status_example`]), where its worker took it as the status's example.
    Ok {
        status: u16,
        retry_after_s: Option<u32>,
        said: Option<Box<str>>,
    },
    Error(Failure),
}

/// Everything the recorder needs about one attempt.
#[derive(Debug, Clone)]
pub(crate) struct RequestRecord {
    /// The request went out on a connection it did not open.
    pub reused: bool,
    pub phases: Phases,
    pub outcome: Outcome,
    /// Bytes of the response (head and body) read for this attempt.
    pub bytes_received: u64,
    /// Body bytes only.
    pub body_bytes: u64,
    /// The attempt was retried once after a stale reused connection.
    pub stale_retry: bool,
    /// HTTP/2: retried once on another connection after the server refused the stream.
    pub refused_retry: bool,
    /// Open loop: the send started later than its intended time (by >= 1 ms).
    pub late: bool,
    /// `-L`: its response was a redirect that was followed (the next hop is a request of
    /// its own).
    pub redirected: bool,
    /// When the attempt ended: its response complete, or its failure.
    pub end: std::time::Instant,
}

/// The server's SETTINGS (the values it sent; `None`: not sent, the default applies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ServerSettings {
    pub header_table_size: Option<u32>,
    pub enable_push: Option<u32>,
    pub max_concurrent_streams: Option<u32>,
    pub initial_window_size: Option<u32>,
    pub max_frame_size: Option<u32>,
    pub max_header_list_size: Option<u32>,
}
