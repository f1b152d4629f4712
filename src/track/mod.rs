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
use std::time::Instant;

use crate::proto::h2::PREFACE_START;
use cleartext::{h2, http};
pub(crate) use conn::{Conn, Ending, Kind, Segment, Side};
use conn::{Dir, HEAD_MAX, IDLE_CLOSE};
use tls::tls;

mod cleartext;
mod conn;
mod tls;

/// Where a new connection's client is when no SYN was seen: the side on a listening port.
type IsListening<'a> = &'a dyn Fn(&SocketAddr) -> bool;

#[derive(Default)]
pub(crate) struct Tracker {
    live: HashMap<(SocketAddr, SocketAddr), Conn>,
    /// Connections open now: from the first packet seen until the first FIN or RST
    /// (after that neither side sends requests on it), and the most at once.
    open_now: u64,
    pub peak_open: u64,
    pub segments: u64,
    /// The live connection the last segment was of.
    last: Option<(SocketAddr, SocketAddr)>,
}

impl Tracker {
    /// Feed one segment; `listening` tells which side of an already open connection is
    /// the server. Returns the connection if the segment ended it.
    pub(crate) fn segment(&mut self, s: &Segment, listening: IsListening) -> Option<Conn> {
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
            self.last = None;
            return self.live.remove(&key);
        }
        self.last = Some(key);
        replaced
    }

    /// The live connection the last segment was of (none when it ended the connection).
    pub(crate) fn touched(&mut self) -> Option<&mut Conn> {
        let key = self.last.take()?;
        self.live.get_mut(&key)
    }

    /// The watch ended: the connections still open, reported as such.
    pub(crate) fn finish(&mut self) -> Vec<Conn> {
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

impl Conn {
    /// A connection read from a relay's two byte streams rather than from packets (no
    /// sequence numbers; the relay's connect was its handshake): `client` is the side
    /// that asked for it.
    pub(crate) fn relayed(client: SocketAddr, server: SocketAddr, at: Instant) -> Conn {
        Conn::new(client, server, false, at)
    }

    /// Bytes relayed from `side`, in order, as they came at `at`.
    pub(crate) fn relayed_bytes(&mut self, side: Side, data: &[u8], at: Instant) {
        if !data.is_empty() {
            data_in(self, side, data, at);
        }
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
        match side {
            Side::Client => c.client_isn = Some(s.seq),
            Side::Server => c.setup.server_syn = true,
        }
        seq = seq.wrapping_add(1);
        dir.next = Some(seq);
    }
    if side == Side::Client && !s.syn && s.ack && c.setup.server_syn && c.setup.tcp.is_none() {
        c.setup.tcp = Some(s.at.saturating_duration_since(c.opened));
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
            let quiet =
                s.at.saturating_duration_since(c.quiet_since.unwrap_or(c.opened));
            c.ending = Some(match side {
                Side::Client => Ending::ClientFin,
                // Nothing asked and unanswered, and quiet for long enough: idle.
                Side::Server if c.requests <= c.responses && quiet >= IDLE_CLOSE => {
                    Ending::ServerIdle
                }
                Side::Server => Ending::ServerFin,
            });
        }
        if c.c2s.fin && c.s2c.fin {
            c.ended = Some(s.at);
        }
    }
}

fn data_in(c: &mut Conn, side: Side, data: &[u8], at: Instant) {
    // Data, unless it turns out to be only a close announcement (TLS, HTTP/2 below).
    let quiet_since = c.quiet_since.replace(at);
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
        if !h2(c, side, data) {
            c.quiet_since = quiet_since;
        }
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
    if c.kind == Kind::Tls && !tls(c, side, data, at) {
        c.quiet_since = quiet_since;
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
