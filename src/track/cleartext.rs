//! Cleartext HTTP on a watched connection: HTTP/1 heads (a request line at the start of
//! a client segment, a status line at the start of a server one, bodies skipped by
//! their framing) and HTTP/2's frame headers (prior knowledge).

use super::conn::asks_close;
use super::conn::request_seen;
use super::conn::user_agent;
use super::conn::Conn;
use super::conn::Side;
use crate::proto::h1::chunked::ChunkedDecoder;
use crate::proto::h1::parse_head;
use crate::proto::h1::request_framing;
use crate::proto::h1::Framing;
use crate::proto::h1::MAX_HEADERS;
use crate::proto::h2::wire::FrameEvent;

/// Cleartext HTTP/2 (prior knowledge): frame headers are read (RFC 9113 §4.1; the
/// payloads are skipped, HPACK is not decoded). A HEADERS frame from the client on a
/// stream above the last one it opened is a request; the server's first HEADERS on
/// that stream, its response (trailers and 1xx heads are not told apart from it).
/// Count the HTTP/2 streams the frames in `data` open and answer; false when `data` held
/// only frame heads of GOAWAY (a close announcement, not an exchange).
pub(super) fn h2(c: &mut Conn, side: Side, mut data: &[u8]) -> bool {
    /// The whole client connection preface: its start, then `SM\r\n\r\n`.
    const PREFACE_LEN: usize = 24;
    const HEADERS: u8 = 0x1;
    const GOAWAY: u8 = 0x7;
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
    let (mut heads, mut goaways) = (0, 0);
    dir.h2_frames.feed(data, |event| {
        if let FrameEvent::Head(h) = event {
            heads += 1;
            match h.kind {
                HEADERS => headers.push(h.stream_id),
                GOAWAY => goaways += 1,
                _ => {}
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
    heads == 0 || heads > goaways
}

/// Count the HTTP/1 heads at the start of `data` (and after each body that ends inside
/// it: by Content-Length, or chunked), read with `proto::h1`'s parsers.
pub(super) fn http(c: &mut Conn, side: Side, mut data: &[u8]) {
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
            if c.user_agent.is_none() {
                c.user_agent = user_agent(&r);
            }
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
