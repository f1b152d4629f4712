//! What the packets say about each TCP connection: who opened it (the SYN's sender is
//! the client), HTTP/1 requests and responses on cleartext connections (a request line
//! at the start of a client segment, a status line at the start of a server one, with
//! Content-Length bodies skipped, so that several in one segment count), on TLS
//! connections the ClientHello and ServerHello (SNI, version, ALPN, resumed or full) and
//! bursts of application data as an estimate of requests, who closed first (FIN or RST),
//! lifetimes and idle gaps. State is kept only while a connection lives; then it becomes
//! a summary.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::proto::h1::chunked::ChunkedDecoder;
use crate::proto::h1::{parse_head, request_framing, Framing, MAX_HEADERS};
use crate::proto::h2::wire::{FrameEvent, Frames};
use crate::proto::h2::PREFACE_START;

/// A TCP segment as captured.
pub struct Segment<'a> {
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
pub enum Side {
    Client,
    Server,
}

/// What a connection carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    #[default]
    Unknown,
    Http,
    /// Cleartext HTTP/2 with prior knowledge (its requests are streams: not counted).
    Http2,
    Tls,
    Other,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TlsInfo {
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
pub enum Ending {
    ClientFin,
    ServerFin,
    ClientReset,
    ServerReset,
    /// Still open when the watch ended.
    OpenAtEnd,
}

/// One direction's stream.
#[derive(Default)]
struct Dir {
    /// The next sequence number expected (after the SYN, or the first segment seen).
    next: Option<u32>,
    bytes: u64,
    /// The first bytes, kept until the connection's kind is known (TLS hellos).
    head: Vec<u8>,
    /// Body bytes still to skip before the next HTTP head (u64::MAX: until the close).
    skip: u64,
    /// In a chunked body: where.
    chunk: Option<ChunkedDecoder>,
    fin: bool,
    /// TLS: this direction's hello was read (or given up on).
    hello_done: bool,
    /// Cleartext HTTP/2: bytes of the client's connection preface passed, and where the
    /// frame reader is.
    h2_preface: usize,
    h2_frames: Frames,
    /// TLS records: bytes left of the current one, and a record header split over
    /// segments.
    rec_left: usize,
    rec_head: Vec<u8>,
}

/// Keep at most this much of a direction's first bytes (a ClientHello is a few hundred
/// bytes; with post-quantum key shares a couple of KiB).
const HEAD_MAX: usize = 16 * 1024;

pub struct Conn {
    pub client: SocketAddr,
    pub server: SocketAddr,
    /// No SYN was seen: it began before the watch.
    pub already_open: bool,
    /// The client's initial sequence number (from its SYN): a SYN sent again with the
    /// same one is a retransmission, not a new connection.
    client_isn: Option<u32>,
    pub opened: Instant,
    pub kind: Kind,
    pub requests: u64,
    pub responses: u64,
    /// Cleartext HTTP/1: the final responses' status codes, with how many of each.
    pub statuses: Vec<(u16, u64)>,
    pub tls: Option<TlsInfo>,
    client_session_id: Option<Vec<u8>>,
    pub ending: Option<Ending>,
    pub ended: Option<Instant>,
    c2s: Dir,
    s2c: Dir,
    /// Who sent the last data (turn-taking).
    last: Option<Side>,
    /// The current client burst already counted as a request (TLS estimate).
    burst_counted: bool,
    /// TLS: a request was counted and its response not yet.
    awaiting_response: bool,
    /// TLS 1.3: the client's first application-data record (its Finished) was passed.
    client_finished: bool,
    last_response_end: Option<Instant>,
    /// When the current client burst began.
    burst_start: Option<Instant>,
    pub gaps: Vec<Duration>,
    /// Requests whose responses have not begun: whether each was a HEAD (its response
    /// has no body whatever its Content-Length says).
    heads_pending: std::collections::VecDeque<bool>,
    /// Cleartext HTTP/2: the highest stream the client opened, and the streams whose
    /// response has not begun.
    h2_last_stream: u32,
    h2_awaiting: std::collections::BTreeSet<u32>,
    /// Cleartext HTTP/1: what the client's last request head asked of the connection's
    /// end, if it asked to close it.
    pub client_close: Option<ClientClose>,
}

/// How a client's request asked for its connection to end after the response (read from
/// its cleartext head).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientClose {
    /// `HTTP/1.0` without `Connection: keep-alive`.
    Http10,
    /// `Connection: close`.
    Header,
}

impl ClientClose {
    pub fn name(self) -> &'static str {
        match self {
            ClientClose::Http10 => "http10_without_keep_alive",
            ClientClose::Header => "connection_close",
        }
    }
}

/// What a request head asks of its connection's end: `Connection: close`, or HTTP/1.0
/// without `Connection: keep-alive`; `None` when it lets the connection persist.
fn asks_close(r: &httparse::Request<'_, '_>) -> Option<ClientClose> {
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
    fn new(client: SocketAddr, server: SocketAddr, already_open: bool, at: Instant) -> Conn {
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
            burst_start: None,
            gaps: Vec::new(),
            heads_pending: std::collections::VecDeque::new(),
            h2_last_stream: 0,
            h2_awaiting: std::collections::BTreeSet::new(),
            client_close: None,
        }
    }

    pub fn bytes(&self) -> (u64, u64) {
        (self.c2s.bytes, self.s2c.bytes)
    }
}

/// Where a new connection's client is when no SYN was seen: the side on a listening port.
pub type IsListening<'a> = &'a dyn Fn(&SocketAddr) -> bool;

#[derive(Default)]
pub struct Tracker {
    live: HashMap<(SocketAddr, SocketAddr), Conn>,
    /// Connections open now: from the first packet seen until the first FIN or RST
    /// (after that neither side sends requests on it), and the most at once.
    open_now: u64,
    pub peak_open: u64,
    pub segments: u64,
}

impl Tracker {
    /// Feed one segment; `listening` tells which side of an already open connection is
    /// the server. Returns the connection if the segment ended it.
    pub fn segment(&mut self, s: &Segment, listening: IsListening) -> Option<Conn> {
        self.segments += 1;
        let fwd = (s.src, s.dst);
        let rev = (s.dst, s.src);
        // A SYN for endpoints still in the table, with a new initial sequence number: the
        // old connection's end was not seen (a dropped packet); it ends here and the new
        // one begins. With the same number it is the SYN sent again (the server's accept
        // queue was full, or the SYN-ACK was lost): the same connection.
        let mut replaced = None;
        let resent = |c: &Conn| c.client == s.src && c.client_isn == Some(s.seq);
        if s.syn && !s.ack && !self.live.get(&fwd).is_some_and(resent) {
            if let Some(mut old) = self.live.remove(&fwd).or_else(|| self.live.remove(&rev)) {
                if old.ending.is_none() {
                    old.ending = Some(Ending::OpenAtEnd);
                    self.open_now -= 1;
                }
                old.ended = Some(s.at);
                replaced = Some(old);
            }
        }
        let key = if self.live.contains_key(&fwd) {
            fwd
        } else if self.live.contains_key(&rev) {
            rev
        } else {
            // A new connection: a SYN (without ACK) names the client; otherwise it was
            // open before the watch (a lone RST or FIN of an unknown connection is not
            // worth a record).
            if s.syn && !s.ack {
                self.live.insert(fwd, Conn::new(s.src, s.dst, false, s.at));
                self.open_now += 1;
                self.peak_open = self.peak_open.max(self.open_now);
                fwd
            } else if s.rst || s.syn || s.payload.is_empty() {
                // A bare ACK, FIN or RST of a connection not seen before (often the last
                // packets of one that just ended): nothing to learn from it.
                return None;
            } else {
                let src_server =
                    listening(&s.src) || (!listening(&s.dst) && s.src.port() < s.dst.port());
                let k = if src_server { rev } else { fwd };
                self.live.insert(k, Conn::new(k.0, k.1, true, s.at));
                self.open_now += 1;
                self.peak_open = self.peak_open.max(self.open_now);
                k
            }
        };
        let c = self.live.get_mut(&key).expect("just found or inserted");
        let side = if s.src == c.client {
            Side::Client
        } else {
            Side::Server
        };
        let was_open = c.ending.is_none();
        feed(c, side, s);
        if was_open && c.ending.is_some() {
            self.open_now -= 1;
        }
        if c.ended.is_some() {
            return self.live.remove(&key);
        }
        replaced
    }

    /// The watch ended: the connections still open, reported as such.
    pub fn finish(&mut self) -> Vec<Conn> {
        self.live
            .drain()
            .map(|(_, mut c)| {
                if c.ending.is_none() {
                    c.ending = Some(Ending::OpenAtEnd);
                }
                c
            })
            .collect()
    }
}

fn feed(c: &mut Conn, side: Side, s: &Segment) {
    let dir = match side {
        Side::Client => &mut c.c2s,
        Side::Server => &mut c.s2c,
    };
    // Sequence numbers: a SYN takes one; new data is what starts at or after `next`.
    let mut seq = s.seq;
    if s.syn {
        if side == Side::Client {
            c.client_isn = Some(s.seq);
        }
        seq = seq.wrapping_add(1);
        dir.next = Some(seq);
    }
    let mut data = s.payload;
    if !data.is_empty() {
        match dir.next {
            None => dir.next = Some(seq),
            Some(next) => {
                let behind = next.wrapping_sub(seq);
                if (behind as i32) > 0 {
                    // A retransmission (wholly or partly of data already seen).
                    if behind as usize >= data.len() {
                        data = &[];
                    } else {
                        data = &data[behind as usize..];
                    }
                }
            }
        }
        if !data.is_empty() {
            let n = dir.next.unwrap_or(seq);
            dir.next = Some(n.wrapping_add(data.len() as u32));
            dir.bytes += data.len() as u64;
        }
    }
    if !data.is_empty() {
        data_in(c, side, data, s.at);
    }
    let dir = match side {
        Side::Client => &mut c.c2s,
        Side::Server => &mut c.s2c,
    };
    if s.rst {
        if c.ending.is_none() {
            c.ending = Some(match side {
                Side::Client => Ending::ClientReset,
                Side::Server => Ending::ServerReset,
            });
        }
        c.ended = Some(s.at);
        return;
    }
    if s.fin && !dir.fin {
        dir.fin = true;
        if c.ending.is_none() {
            c.ending = Some(match side {
                Side::Client => Ending::ClientFin,
                Side::Server => Ending::ServerFin,
            });
        }
        if c.c2s.fin && c.s2c.fin {
            c.ended = Some(s.at);
        }
    }
}

/// A request began. The first of a client burst ends an idle gap: from the end of the
/// last response to this burst's start.
fn request_seen(c: &mut Conn) {
    if !c.burst_counted {
        if let (Some(end), Some(start)) = (c.last_response_end, c.burst_start) {
            c.gaps.push(start.saturating_duration_since(end));
        }
    }
    c.burst_counted = true;
    c.requests += 1;
}

fn data_in(c: &mut Conn, side: Side, data: &[u8], at: Instant) {
    let new_burst = c.last != Some(side);
    c.last = Some(side);
    if new_burst && side == Side::Client {
        c.burst_counted = false;
        c.burst_start = Some(at);
    }
    // Server data once a request was made is a response (not a TLS handshake's).
    if side == Side::Server && c.requests > 0 {
        c.last_response_end = Some(at);
    }
    let keep = |dir: &mut Dir| {
        if dir.head.len() < HEAD_MAX {
            let room = HEAD_MAX - dir.head.len();
            dir.head.extend_from_slice(&data[..data.len().min(room)]);
        }
    };
    if c.kind == Kind::Unknown {
        keep(match side {
            Side::Client => &mut c.c2s,
            Side::Server => &mut c.s2c,
        });
        c.kind = classify(&c.c2s.head, &c.s2c.head);
        match c.kind {
            Kind::Http => {
                // Count what the kept bytes hold, from the start of each stream.
                let (ch, sh) = (
                    std::mem::take(&mut c.c2s.head),
                    std::mem::take(&mut c.s2c.head),
                );
                if !ch.is_empty() {
                    http(c, Side::Client, &ch);
                }
                if !sh.is_empty() {
                    http(c, Side::Server, &sh);
                }
                return;
            }
            Kind::Http2 => {
                let (ch, sh) = (
                    std::mem::take(&mut c.c2s.head),
                    std::mem::take(&mut c.s2c.head),
                );
                h2(c, Side::Client, &ch);
                h2(c, Side::Server, &sh);
                return;
            }
            Kind::Tls | Kind::Unknown => {}
            Kind::Other => {
                c.c2s.head = Vec::new();
                c.s2c.head = Vec::new();
                return;
            }
        }
    } else if c.kind == Kind::Http {
        http(c, side, data);
        return;
    } else if c.kind == Kind::Http2 {
        h2(c, side, data);
        return;
    } else if c.kind == Kind::Tls {
        let dir = match side {
            Side::Client => &mut c.c2s,
            Side::Server => &mut c.s2c,
        };
        if !dir.hello_done {
            keep(dir);
        }
    }
    if c.kind == Kind::Tls {
        tls(c, side, data);
    }
}

/// HTTP/1 when the client's first bytes are a request line; TLS when they are a
/// handshake record; other when neither (or the server spoke first with neither).
fn classify(client: &[u8], server: &[u8]) -> Kind {
    if client.len() >= 3 {
        if client[0] == 0x16 && client[1] == 0x03 {
            return Kind::Tls;
        }
        // The HTTP/2 connection preface (RFC 9113 §3.4).
        let n = client.len().min(PREFACE_START.len());
        if client[..n] == PREFACE_START[..n] {
            return if n == PREFACE_START.len() {
                Kind::Http2
            } else {
                Kind::Unknown
            };
        }
        let mut h = [httparse::EMPTY_HEADER; 0];
        let mut req = httparse::Request::new(&mut h);
        return match req.parse(client) {
            Ok(_) if req.method.is_some() => Kind::Http,
            Err(httparse::Error::TooManyHeaders) => Kind::Http,
            Ok(_) if client.len() < 16 => Kind::Unknown,
            _ => Kind::Other,
        };
    }
    // A server that speaks first: not HTTP/1 or TLS, unless it is an HTTP/2 server's
    // SETTINGS frame (type 4 on stream 0), which may be seen before the client's preface.
    let h2_settings = server.len() >= 9 && server[3] == 0x4 && server[5..9] == [0; 4];
    if !server.is_empty() && client.is_empty() && server.len() >= 8 && !h2_settings {
        return Kind::Other;
    }
    Kind::Unknown
}

/// Cleartext HTTP/2 (prior knowledge): frame headers are read (RFC 9113 §4.1; the
/// payloads are skipped, HPACK is not decoded). A HEADERS frame from the client on a
/// stream above the last one it opened is a request; the server's first HEADERS on
/// that stream, its response (trailers and 1xx heads are not told apart from it).
fn h2(c: &mut Conn, side: Side, mut data: &[u8]) {
    /// The whole client connection preface: its start, then `SM\r\n\r\n`.
    const PREFACE_LEN: usize = 24;
    const HEADERS: u8 = 0x1;
    let dir = match side {
        Side::Client => &mut c.c2s,
        Side::Server => &mut c.s2c,
    };
    if side == Side::Client && dir.h2_preface < PREFACE_LEN {
        let n = (PREFACE_LEN - dir.h2_preface).min(data.len());
        dir.h2_preface += n;
        data = &data[n..];
    }
    let mut headers = Vec::new();
    dir.h2_frames.feed(data, |event| {
        if let FrameEvent::Head(h) = event {
            if h.kind == HEADERS {
                headers.push(h.stream_id);
            }
        }
    });
    for stream in headers {
        match side {
            Side::Client if stream > c.h2_last_stream => {
                c.h2_last_stream = stream;
                request_seen(c);
                if c.h2_awaiting.len() < 4096 {
                    c.h2_awaiting.insert(stream);
                }
            }
            Side::Server if c.h2_awaiting.remove(&stream) => c.responses += 1,
            _ => {}
        }
    }
}

/// Count the HTTP/1 heads at the start of `data` (and after each body that ends inside
/// it: by Content-Length, or chunked), read with `proto::h1`'s parsers.
fn http(c: &mut Conn, side: Side, mut data: &[u8]) {
    loop {
        let dir = match side {
            Side::Client => &mut c.c2s,
            Side::Server => &mut c.s2c,
        };
        if dir.skip > 0 {
            let n = (dir.skip.min(data.len() as u64)) as usize;
            if dir.skip != u64::MAX {
                dir.skip -= n as u64;
            }
            data = &data[n..];
        }
        if let Some(chunks) = dir.chunk.as_mut() {
            match chunks.feed(data) {
                Ok(fed) => {
                    data = &data[fed.consumed..];
                    if fed.done {
                        dir.chunk = None;
                    }
                }
                // A malformed body is given up on: the next head starts a later segment.
                Err(_) => {
                    dir.chunk = None;
                    return;
                }
            }
        }
        if data.is_empty() {
            return;
        }
        let head = match side {
            Side::Client => request_head(c, data),
            Side::Server => response_head(c, data),
        };
        let (n, body) = match head {
            Head::Interim(n) => {
                // Not the response itself: skip it, the final one follows.
                data = &data[n..];
                continue;
            }
            // Body bytes, or a head we lost: the next head starts a later segment.
            Head::None => return,
            Head::Started(n, body) => (n, body),
        };
        match side {
            Side::Client => request_seen(c),
            Side::Server => c.responses += 1,
        }
        let (Some(n), Some(body)) = (n, body) else {
            // A head split over segments (or one the parser refused): the rest of this
            // segment is not a head.
            return;
        };
        let dir = match side {
            Side::Client => &mut c.c2s,
            Side::Server => &mut c.s2c,
        };
        match body {
            Framing::None => {}
            Framing::Length(len) => dir.skip = len,
            Framing::Chunked => dir.chunk = Some(ChunkedDecoder::new()),
            Framing::UntilClose => dir.skip = u64::MAX,
        }
        data = &data[n..];
    }
}

/// What the start of a segment holds.
enum Head {
    /// No head: body bytes, or a head whose start was lost.
    None,
    /// A 1xx response head of this many bytes.
    Interim(usize),
    /// A head began: its length and its body's framing, once it is complete here.
    Started(Option<usize>, Option<Framing>),
}

fn request_head(c: &mut Conn, data: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut r = httparse::Request::new(&mut headers);
    let head = match r.parse(data) {
        Ok(httparse::Status::Complete(n)) => {
            c.client_close = asks_close(&r);
            Head::Started(Some(n), Some(request_framing(r.headers)))
        }
        Ok(httparse::Status::Partial) if r.method.is_some() && r.path.is_some() => {
            Head::Started(None, None)
        }
        _ => return Head::None,
    };
    if c.heads_pending.len() < 1024 {
        c.heads_pending.push_back(r.method == Some("HEAD"));
    }
    head
}

fn response_head(c: &mut Conn, data: &[u8]) -> Head {
    // A response to HEAD has no body (nor do 204 and 304: `parse_head` knows).
    let to_head = c.heads_pending.front().copied().unwrap_or(false);
    // "HTTP/1.1 404 ...": its status, counted for a final response (not 1xx).
    let status = data
        .get(9..12)
        .filter(|_| data.starts_with(b"HTTP/"))
        .and_then(|d| std::str::from_utf8(d).ok())
        .and_then(|d| d.parse::<u16>().ok())
        .filter(|s| *s >= 200);
    if let Some(s) = status {
        match c.statuses.iter().position(|(code, _)| *code == s) {
            Some(i) => c.statuses[i].1 += 1,
            None if c.statuses.len() < 16 => c.statuses.push((s, 1)),
            None => {}
        }
    }
    match parse_head(data, to_head) {
        Ok(Some(h)) if h.is_informational() => Head::Interim(h.head_len),
        Ok(Some(h)) => {
            c.heads_pending.pop_front();
            Head::Started(Some(h.head_len), Some(h.framing))
        }
        // A status line begun in this segment: counted, the rest of the head follows.
        Ok(None) if data.starts_with(b"HTTP/") => Head::Started(None, None),
        // A head the strict parser refuses is still a response on the wire: counted;
        // its body is not followed.
        Err(_) if data.starts_with(b"HTTP/") => {
            c.heads_pending.pop_front();
            Head::Started(None, None)
        }
        _ => Head::None,
    }
}

fn tls(c: &mut Conn, side: Side, data: &[u8]) {
    let info = c.tls.get_or_insert_with(TlsInfo::default);
    let dir = match side {
        Side::Client => &mut c.c2s,
        Side::Server => &mut c.s2c,
    };
    // The hellos, from the kept first bytes of each direction.
    if !dir.hello_done && !dir.head.is_empty() {
        match hello(&dir.head) {
            Hello::NeedMore if dir.head.len() < HEAD_MAX => {}
            Hello::Client {
                sni,
                alpn,
                session_id,
                offered,
            } => {
                info.sni = sni;
                info.alpn_offered = alpn;
                info.offered_resumption = offered || !session_id.is_empty();
                c.client_session_id = Some(session_id);
                dir.head = Vec::new();
                dir.hello_done = true;
            }
            Hello::Server {
                version,
                alpn,
                psk,
                session_id,
            } => {
                let v13 = version == "1.3";
                info.resumed = Some(if v13 {
                    psk
                } else {
                    !session_id.is_empty()
                        && c.client_session_id.as_deref() == Some(session_id.as_slice())
                });
                info.version = Some(version);
                info.alpn = alpn;
                dir.head = Vec::new();
                dir.hello_done = true;
            }
            _ => {
                dir.head = Vec::new();
                dir.hello_done = true;
            }
        }
    }
    // Requests, estimated: a client burst that carries an application-data record (in
    // TLS 1.3, after the client's Finished, which travels as one); a response: the
    // server's next application data.
    let v13 = info.version.as_deref().map_or(true, |v| v == "1.3");
    let mut records = Vec::new();
    let dir = match side {
        Side::Client => &mut c.c2s,
        Side::Server => &mut c.s2c,
    };
    let mut i = 0;
    while i < data.len() {
        if dir.rec_left > 0 {
            let n = dir.rec_left.min(data.len() - i);
            dir.rec_left -= n;
            i += n;
            continue;
        }
        let take = (5 - dir.rec_head.len()).min(data.len() - i);
        dir.rec_head.extend_from_slice(&data[i..i + take]);
        i += take;
        if dir.rec_head.len() == 5 {
            let len = usize::from(u16::from_be_bytes([dir.rec_head[3], dir.rec_head[4]]));
            records.push((dir.rec_head[0], len));
            dir.rec_left = len;
            dir.rec_head.clear();
        }
    }
    // In TLS 1.3 alerts (close_notify) and key updates travel as application data too,
    // in records of at most 22 bytes; an HTTP request or response is larger.
    for _ in records
        .into_iter()
        .filter(|(t, len)| *t == 0x17 && *len >= 32)
    {
        match side {
            Side::Client if v13 && !c.client_finished => c.client_finished = true,
            Side::Client => {
                if !c.burst_counted {
                    request_seen(c);
                    c.awaiting_response = true;
                }
            }
            Side::Server => {
                if c.awaiting_response {
                    c.awaiting_response = false;
                    c.responses += 1;
                }
            }
        }
    }
}

enum Hello {
    NeedMore,
    Neither,
    Client {
        sni: Option<String>,
        alpn: Option<String>,
        session_id: Vec<u8>,
        /// A pre_shared_key (1.3) or a non-empty session ticket (1.2) was offered.
        offered: bool,
    },
    Server {
        version: String,
        alpn: Option<String>,
        psk: bool,
        session_id: Vec<u8>,
    },
}

fn version_name(v: u16) -> String {
    match v {
        0x0304 => "1.3".into(),
        0x0303 => "1.2".into(),
        0x0302 => "1.1".into(),
        0x0301 => "1.0".into(),
        v => format!("0x{v:04x}"),
    }
}

fn hello(buf: &[u8]) -> Hello {
    use tls_parser::{
        parse_tls_client_hello_extensions, parse_tls_message_handshake, parse_tls_record_header,
        parse_tls_server_hello_extensions, TlsExtension, TlsMessage, TlsMessageHandshake,
        TlsRecordType,
    };
    let (rest, hdr) = match parse_tls_record_header(buf) {
        Ok(x) => x,
        Err(tls_parser::Err::Incomplete(_)) => return Hello::NeedMore,
        Err(_) => return Hello::Neither,
    };
    if hdr.record_type != TlsRecordType::Handshake {
        return Hello::Neither;
    }
    let body = &rest[..rest.len().min(usize::from(hdr.len))];
    match parse_tls_message_handshake(body) {
        Ok((_, TlsMessage::Handshake(TlsMessageHandshake::ClientHello(ch)))) => {
            let mut sni = None;
            let mut alpn = None;
            let mut offered = false;
            if let Some(Ok((_, exts))) = ch.ext.map(parse_tls_client_hello_extensions) {
                for e in exts {
                    match e {
                        TlsExtension::SNI(names) => {
                            sni = names
                                .first()
                                .map(|(_, n)| String::from_utf8_lossy(n).into_owned());
                        }
                        TlsExtension::ALPN(p) => {
                            alpn = Some(
                                p.iter()
                                    .map(|p| String::from_utf8_lossy(p).into_owned())
                                    .collect::<Vec<_>>()
                                    .join(","),
                            );
                        }
                        TlsExtension::PreSharedKey(_) => offered = true,
                        TlsExtension::SessionTicket(t) if !t.is_empty() => offered = true,
                        _ => {}
                    }
                }
            }
            Hello::Client {
                sni,
                alpn,
                session_id: ch.session_id.map(<[u8]>::to_vec).unwrap_or_default(),
                offered,
            }
        }
        Ok((_, TlsMessage::Handshake(TlsMessageHandshake::ServerHello(sh)))) => {
            let mut version = sh.version.0;
            let mut alpn = None;
            let mut psk = false;
            if let Some(Ok((_, exts))) = sh.ext.map(parse_tls_server_hello_extensions) {
                for e in exts {
                    match e {
                        TlsExtension::SupportedVersions(v) => {
                            if let Some(v) = v.first() {
                                version = v.0;
                            }
                        }
                        TlsExtension::ALPN(p) => {
                            alpn = p.first().map(|p| String::from_utf8_lossy(p).into_owned());
                        }
                        TlsExtension::PreSharedKey(_) => psk = true,
                        _ => {}
                    }
                }
            }
            Hello::Server {
                version: version_name(version),
                alpn,
                psk,
                session_id: sh.session_id.map(<[u8]>::to_vec).unwrap_or_default(),
            }
        }
        Err(tls_parser::Err::Incomplete(_)) if body.len() < usize::from(hdr.len) => Hello::NeedMore,
        _ => Hello::Neither,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(src: &str, dst: &str, seq: u32, flags: &str, at: Instant) -> Segment<'static> {
        data(src, dst, seq, flags, b"", at)
    }

    fn data<'a>(
        src: &str,
        dst: &str,
        seq: u32,
        flags: &str,
        payload: &'a [u8],
        at: Instant,
    ) -> Segment<'a> {
        Segment {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            seq,
            syn: flags.contains('S'),
            ack: flags.contains('A'),
            fin: flags.contains('F'),
            rst: flags.contains('R'),
            payload,
            at,
        }
    }

    /// One turn: the client's bytes and where they are cut into segments, then the
    /// server's.
    type Turn<'a> = (&'a [u8], &'a [usize], &'a [u8], &'a [usize]);

    /// One keep-alive connection, fed turn by turn; (requests, responses).
    fn exchange(turns: &[Turn]) -> (u64, u64) {
        let (c, srv) = ("127.0.0.1:40001", "127.0.0.1:80");
        let t = Instant::now();
        let mut tr = Tracker::default();
        let no = |_: &SocketAddr| false;
        tr.segment(&seg(c, srv, 0, "S", t), &no);
        tr.segment(&seg(srv, c, 0, "SA", t), &no);
        let (mut cs, mut ss) = (1u32, 1u32);
        let mut feed = |from: &str, to: &str, seq: &mut u32, bytes: &[u8], cuts: &[usize]| {
            let mut start = 0;
            for end in cuts.iter().copied().chain([bytes.len()]) {
                if end > start {
                    tr.segment(&data(from, to, *seq, "A", &bytes[start..end], t), &no);
                    *seq += (end - start) as u32;
                    start = end;
                }
            }
        };
        for (req, rcuts, resp, scuts) in turns {
            feed(c, srv, &mut cs, req, rcuts);
            feed(srv, c, &mut ss, resp, scuts);
        }
        let conn = tr.live.values().next().expect("the connection is open");
        (conn.requests, conn.responses)
    }

    /// Cleartext HTTP/2: the server's SETTINGS may come before the client's preface; the
    /// client's HEADERS frames on new streams are requests, the server's first HEADERS
    /// on each is its response, however the frames are cut into segments.
    #[test]
    fn cleartext_http2_streams_are_requests_whoever_speaks_first() {
        let frame = |typ: u8, stream: u32, len: usize| {
            let mut f = vec![0, 0, len as u8, typ, 0x4];
            f.extend_from_slice(&stream.to_be_bytes());
            f.extend(std::iter::repeat_n(0xaa, len));
            f
        };
        let settings = frame(0x4, 0, 6);
        let mut client = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        client.extend(frame(0x4, 0, 12));
        for stream in [1, 3, 5] {
            client.extend(frame(0x1, stream, 20));
        }
        // Trailers on stream 5: not a new request.
        client.extend(frame(0x1, 5, 10));
        let mut server = settings.clone();
        for stream in [1, 3, 5] {
            server.extend(frame(0x1, stream, 7));
            server.extend(frame(0x0, stream, 13));
        }
        for cut in [1, 9, 20, 24, 30, 40, 57] {
            let (c, srv) = ("127.0.0.1:40002", "127.0.0.1:80");
            let t = Instant::now();
            let mut tr = Tracker::default();
            let no = |_: &SocketAddr| false;
            tr.segment(&seg(c, srv, 0, "S", t), &no);
            tr.segment(&seg(srv, c, 0, "SA", t), &no);
            // The server's SETTINGS first, then the client's bytes cut at `cut`, then
            // the rest of the server's.
            let s1 = settings.len();
            tr.segment(&data(srv, c, 1, "A", &server[..s1], t), &no);
            tr.segment(&data(c, srv, 1, "A", &client[..cut], t), &no);
            tr.segment(&data(c, srv, 1 + cut as u32, "A", &client[cut..], t), &no);
            tr.segment(&data(srv, c, 1 + s1 as u32, "A", &server[s1..], t), &no);
            let conn = tr.live.values().next().expect("open");
            assert_eq!(conn.kind, Kind::Http2, "cut {cut}");
            assert_eq!((conn.requests, conn.responses), (3, 3), "cut {cut}");
        }
    }

    /// Chunked bodies (sizes, extensions, trailers, split anywhere), a HEAD whose
    /// response names a length it does not send, and responses that arrive together:
    /// every head is counted once, and no body byte is taken for a head.
    #[test]
    fn heads_after_chunked_bodies_and_head_requests_are_counted() {
        let get = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nHTTP/\r\nA\r\n0123456789\r\n0\r\nX-Sum: 1\r\n\r\n";
        let head = b"HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n";
        let head_resp = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
        let sized = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd";
        // The chunked response whole, then cut inside its size line, its data, its CRLF
        // and its trailer.
        assert_eq!(exchange(&[(get, &[], chunked, &[])]), (1, 1));
        for cut in 46..chunked.len() {
            assert_eq!(
                exchange(&[(get, &[], chunked, &[cut]), (get, &[], sized, &[])]),
                (2, 2),
                "cut at {cut}"
            );
        }
        // HEAD then GET: the HEAD response's length is not skipped.
        assert_eq!(
            exchange(&[(head, &[], head_resp, &[]), (get, &[], sized, &[])]),
            (2, 2)
        );
        // Pipelined: two GETs in one segment, a chunked and a sized response in one.
        let both_req = [&get[..], &get[..]].concat();
        let both_resp = [&chunked[..], &sized[..]].concat();
        assert_eq!(exchange(&[(&both_req, &[], &both_resp, &[])]), (2, 2));
        // A chunked request body (a POST), then the next request.
        let post = b"POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nGET\r\n0\r\n\r\n";
        let posted = [&post[..], &get[..]].concat();
        assert_eq!(
            exchange(&[(&posted, &[], &[&sized[..], &sized[..]].concat(), &[])]),
            (2, 2)
        );
    }

    /// A SYN sent again (same initial sequence number) is the same connection; a SYN on
    /// the same endpoints with a new one ends the old connection and begins a new one.
    #[test]
    fn a_resent_syn_is_not_a_new_connection() {
        let (c, srv) = ("127.0.0.1:40000", "127.0.0.1:80");
        let t = Instant::now();
        let mut tr = Tracker::default();
        let no = |_: &SocketAddr| false;
        assert!(tr.segment(&seg(c, srv, 1000, "S", t), &no).is_none());
        assert!(tr.segment(&seg(c, srv, 1000, "S", t), &no).is_none());
        assert!(tr.segment(&seg(srv, c, 5000, "SA", t), &no).is_none());
        assert_eq!(tr.live.len(), 1);
        let old = tr
            .segment(&seg(c, srv, 9000, "S", t), &no)
            .expect("the old one ends");
        assert_eq!(old.ending, Some(Ending::OpenAtEnd));
        assert_eq!(tr.live.len(), 1);
        assert_eq!(tr.finish().len(), 1);
    }
}
