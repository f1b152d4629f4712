//! A watched TCP connection as the packets show it: its segments, which side spoke,
//! what it carries (HTTP/1, HTTP/2, TLS), the state of each direction's reading, and
//! what was counted on it until it ended.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::proto::h1::chunked::ChunkedDecoder;
use crate::proto::h2::wire::Frames;

/// A TCP segment as captured.
pub(crate) struct Segment<'a> {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub syn: bool,
    pub ack: bool,
    pub fin: bool,
    pub rst: bool,
    pub payload: &'a [u8],
    pub at: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Side {
    Client,
    Server,
}

/// What a connection carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    #[default]
    Unknown,
    Http,
    /// Cleartext HTTP/2 with prior knowledge (its requests are streams: not counted).
    Http2,
    Tls,
    Other,
}

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct TlsInfo {
    pub sni: Option<String>,
    /// The version the server selected: "1.3", "1.2", ...
    pub version: Option<String>,
    /// The protocol the server chose, where the ServerHello shows it (TLS 1.2; in 1.3 it
    /// is in the encrypted extensions).
    pub alpn: Option<String>,
    /// The protocols the client offered, comma-separated.
    pub alpn_offered: Option<String>,
    /// None until the ServerHello is seen.
    pub resumed: Option<bool>,
    /// The client offered a session to resume (a PSK for 1.3, a session id or ticket
    /// for 1.2).
    pub offered_resumption: bool,
}

/// How a connection ended, as far as the watch saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Ending {
    ClientFin,
    ServerFin,
    ClientReset,
    ServerReset,
    /// The server's FIN, on a connection idle for at least [`IDLE_CLOSE`]: no request
    /// waiting for its response, nothing but close announcements (a TLS close_notify,
    /// an HTTP/2 GOAWAY) since the last exchange. The server's keep-alive timeout.
    ServerIdle,
    /// Still open when the watch ended.
    OpenAtEnd,
}

/// How long a connection must have been quiet for the server's FIN to be its idle
/// close ([`Ending::ServerIdle`]) rather than its answer to the last exchange.
pub(super) const IDLE_CLOSE: Duration = Duration::from_secs(1);

/// One direction's stream.
#[derive(Default)]
pub(super) struct Dir {
    /// The next sequence number expected (after the SYN, or the first segment seen).
    pub(super) next: Option<u32>,
    pub(super) bytes: u64,
    /// The first bytes, kept until the connection's kind is known (TLS hellos).
    pub(super) head: Vec<u8>,
    /// Body bytes still to skip before the next HTTP head (u64::MAX: until the close).
    pub(super) skip: u64,
    /// In a chunked body: where.
    pub(super) chunk: Option<ChunkedDecoder>,
    pub(super) fin: bool,
    /// TLS: this direction's hello was read (or given up on).
    pub(super) hello_done: bool,
    /// Cleartext HTTP/2: bytes of the client's connection preface passed, and where the
    /// frame reader is.
    pub(super) h2_preface: usize,
    pub(super) h2_frames: Frames,
    /// TLS records: bytes left of the current one, and a record header split over
    /// segments.
    pub(super) rec_left: usize,
    pub(super) rec_head: Vec<u8>,
}

/// Keep at most this much of a direction's first bytes (a ClientHello is a few hundred
/// bytes; with post-quantum key shares a couple of KiB).
pub(super) const HEAD_MAX: usize = 16 * 1024;

pub(crate) struct Conn {
    pub client: SocketAddr,
    pub server: SocketAddr,
    /// No SYN was seen: it began before the watch.
    pub already_open: bool,
    /// The client's initial sequence number (from its SYN): a SYN sent again with the
    /// same one is a retransmission, not a new connection.
    pub(super) client_isn: Option<u32>,
    pub opened: Instant,
    pub kind: Kind,
    pub requests: u64,
    pub responses: u64,
    /// Cleartext HTTP/1: the final responses' status codes, with how many of each.
    pub statuses: Vec<(u16, u64)>,
    pub tls: Option<TlsInfo>,
    pub(super) client_session_id: Option<Vec<u8>>,
    pub ending: Option<Ending>,
    pub ended: Option<Instant>,
    pub(super) c2s: Dir,
    pub(super) s2c: Dir,
    /// Who sent the last data (turn-taking).
    pub(super) last: Option<Side>,
    /// The current client burst already counted as a request (TLS estimate).
    pub(super) burst_counted: bool,
    /// TLS: a request was counted and its response not yet.
    pub(super) awaiting_response: bool,
    /// TLS 1.3: the client's first application-data record (its Finished) was passed.
    pub(super) client_finished: bool,
    pub(super) last_response_end: Option<Instant>,
    /// When data other than a close announcement last passed, either way.
    pub(super) quiet_since: Option<Instant>,
    /// When the current client burst began.
    pub(super) burst_start: Option<Instant>,
    /// The idle gaps before its reuses (count, min, mean, max: flat however many).
    pub gaps: crate::report::audit::GapStats,
    /// The gaps not yet taken by the live metrics (taken after each segment, or dropped
    /// when nothing takes them).
    pub new_gaps: Vec<Duration>,
    /// Requests whose responses have not begun: whether each was a HEAD (its response
    /// has no body whatever its Content-Length says).
    pub(super) heads_pending: std::collections::VecDeque<bool>,
    /// Cleartext HTTP/2: the highest stream the client opened, and the streams whose
    /// response has not begun.
    pub(super) h2_last_stream: u32,
    pub(super) h2_awaiting: std::collections::BTreeSet<u32>,
    /// Cleartext HTTP/1: what the client's last request head asked of the connection's
    /// end, if it asked to close it.
    pub client_close: Option<ClientClose>,
    /// Cleartext HTTP/1: the `User-Agent` of the first request head that had one (at
    /// most [`USER_AGENT_KEPT`] bytes).
    pub user_agent: Option<Box<str>>,
    /// The handshakes' durations, as seen where the capture is.
    pub setup: Setup,
    /// What the live metrics have counted of it so far.
    pub metered: Metered,
}

/// How long a connection's handshakes took on the wire, when they were seen. Each is one
/// round trip and the peers' work wherever the capture is (the client's machine or the
/// server's): TCP from the SYN to the client's ACK of the SYN-ACK; TLS from the
/// ClientHello to the handshake's last Finished (TLS 1.3: the client's; TLS 1.2: the
/// later of the two sides' ChangeCipherSpec, each followed by its Finished).
#[derive(Debug, Default)]
pub(crate) struct Setup {
    pub tcp: Option<Duration>,
    pub tls: Option<Duration>,
    pub(super) server_syn: bool,
    pub(super) hello_at: Option<Instant>,
    /// TLS 1.2: the client's and the server's ChangeCipherSpec seen.
    pub(super) ccs: (bool, bool),
}

/// What the live metrics (`watch --metrics`) have counted of a connection: its label
/// once known, and how far each of its figures was counted.
#[derive(Debug, Default)]
pub(crate) struct Metered {
    /// The client program's name (or `unknown`), once known.
    pub label: Option<std::sync::Arc<str>>,
    pub opened: bool,
    /// Answered requests counted.
    pub answered: u64,
    pub tls: bool,
    pub h2: bool,
    pub closed: bool,
    /// The TCP and TLS handshakes' durations counted.
    pub tcp: bool,
    pub tls_setup: bool,
}

/// How a client's request asked for its connection to end after the response (read from
/// its cleartext head).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientClose {
    /// `HTTP/1.0` without `Connection: keep-alive`.
    Http10,
    /// `Connection: close`.
    Header,
}

impl ClientClose {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ClientClose::Http10 => "http10_without_keep_alive",
            ClientClose::Header => "connection_close",
        }
    }
}

/// What a request head asks of its connection's end: `Connection: close`, or HTTP/1.0
/// without `Connection: keep-alive`; `None` when it lets the connection persist.
/// The most bytes of a `User-Agent` kept: enough to name the software and its version.
pub(super) const USER_AGENT_KEPT: usize = 80;

/// The `User-Agent` a request head sent, cut to [`USER_AGENT_KEPT`] bytes.
pub(super) fn user_agent(r: &httparse::Request<'_, '_>) -> Option<Box<str>> {
    let h = r
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("user-agent"))?;
    let v = &h.value[..h.value.len().min(USER_AGENT_KEPT)];
    Some(String::from_utf8_lossy(v).into())
}

pub(super) fn asks_close(r: &httparse::Request<'_, '_>) -> Option<ClientClose> {
    let connection = |token: &str| {
        r.headers.iter().any(|h| {
            h.name.eq_ignore_ascii_case("connection")
                && crate::proto::h1::response::has_token(h.value, token)
        })
    };
    // HTTP/1.0 without keep-alive ends the connection whatever else it says (nginx's
    // upstream requests also carry `Connection: close`): named as such.
    if r.version == Some(0) && !connection("keep-alive") {
        Some(ClientClose::Http10)
    } else if connection("close") {
        Some(ClientClose::Header)
    } else {
        None
    }
}

impl Conn {
    pub(super) fn new(
        client: SocketAddr,
        server: SocketAddr,
        already_open: bool,
        at: Instant,
    ) -> Conn {
        Conn {
            client,
            server,
            already_open,
            client_isn: None,
            opened: at,
            kind: Kind::Unknown,
            requests: 0,
            responses: 0,
            statuses: Vec::new(),
            tls: None,
            client_session_id: None,
            ending: None,
            ended: None,
            c2s: Dir::default(),
            s2c: Dir::default(),
            last: None,
            burst_counted: false,
            awaiting_response: false,
            client_finished: false,
            last_response_end: None,
            quiet_since: None,
            burst_start: None,
            gaps: Default::default(),
            new_gaps: Vec::new(),
            heads_pending: std::collections::VecDeque::new(),
            h2_last_stream: 0,
            h2_awaiting: std::collections::BTreeSet::new(),
            client_close: None,
            user_agent: None,
            setup: Setup::default(),
            metered: Metered::default(),
        }
    }

    pub(crate) fn bytes(&self) -> (u64, u64) {
        (self.c2s.bytes, self.s2c.bytes)
    }
}

/// A request began. The first of a client burst ends an idle gap: from the end of the
/// last response to this burst's start.
pub(super) fn request_seen(c: &mut Conn) {
    if !c.burst_counted {
        if let (Some(end), Some(start)) = (c.last_response_end, c.burst_start) {
            let gap = start.saturating_duration_since(end);
            c.gaps.add(gap.as_secs_f64() * 1e3);
            c.new_gaps.push(gap);
        }
    }
    c.burst_counted = true;
    c.requests += 1;
}
