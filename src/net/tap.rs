//! What a TLS client's handshake puts on the wire, read off the stream beneath
//! rustls (which does not say): the ClientHellos it sends (a second one answers a
//! HelloRetryRequest), the first one's size, and the bytes the server sends before the
//! client's next handshake record (its first flight, certificate chain included).
//!
//! Only the records' 5-byte headers and the first byte of a handshake record are read;
//! once the client's flight after the hello goes out, the tap stops looking and the
//! stream is plain TCP.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::transport::Transport;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::record::Wire;

/// TLS record content types.
const CHANGE_CIPHER_SPEC: u8 = 20;
const HANDSHAKE: u8 = 22;
/// The handshake message type of a ClientHello.
const CLIENT_HELLO: u8 = 1;

/// A TCP stream under a TLS client, its handshake's records watched until it is done.
pub(crate) struct Tapped {
    tcp: Transport,
    tap: Option<Box<Tap>>,
}

#[derive(Default)]
struct Tap {
    wire: Wire,
    /// The record header being gathered from what the client writes, and how many of
    /// its bytes are in.
    header: [u8; 5],
    have: usize,
    /// The current record's length, and the bytes of its body still to pass.
    rec_len: usize,
    body_left: usize,
    /// A handshake record's first four bytes (message type, 24-bit length), and how
    /// many are in.
    head: [u8; 4],
    head_have: usize,
    /// Bytes the server sent since the last ClientHello, and when the first and the last
    /// of them were read.
    read_since_hello: u64,
    flight_first: Option<std::time::Instant>,
    flight_last: Option<std::time::Instant>,
    /// The client's flight after its hello went out: nothing more to watch.
    done: bool,
}

impl Tap {
    /// What the client wrote: walk its records.
    fn wrote(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.done {
            if self.body_left == 0 {
                let take = (5 - self.have).min(bytes.len());
                self.header[self.have..self.have + take].copy_from_slice(&bytes[..take]);
                self.have += take;
                bytes = &bytes[take..];
                if self.have == 5 {
                    self.have = 0;
                    self.rec_len =
                        usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                    self.body_left = self.rec_len;
                    self.head_have = 0;
                    if self.header[0] != HANDSHAKE && self.header[0] != CHANGE_CIPHER_SPEC {
                        // Application data: TLS 1.3's encrypted Finished (or early data).
                        self.end();
                    }
                }
                continue;
            }
            if self.header[0] == HANDSHAKE && self.head_have < 4 {
                let take = (4 - self.head_have).min(bytes.len()).min(self.body_left);
                self.head[self.head_have..self.head_have + take].copy_from_slice(&bytes[..take]);
                self.head_have += take;
                self.body_left -= take;
                bytes = &bytes[take..];
                if self.head_have == 4 || self.body_left == 0 {
                    // A ClientHello fills its record: its own length is the record's less
                    // 4. Anything else (TLS 1.2's ClientKeyExchange, or its encrypted
                    // Finished after a resumption) ends the watch.
                    let len = u32::from_be_bytes([0, self.head[1], self.head[2], self.head[3]]);
                    if self.head_have == 4
                        && self.head[0] == CLIENT_HELLO
                        && len as usize + 4 == self.rec_len
                    {
                        // A second one answers a HelloRetryRequest.
                        self.hello();
                        self.head_have = 4;
                    } else {
                        self.end();
                    }
                }
                continue;
            }
            let take = self.body_left.min(bytes.len());
            self.body_left -= take;
            bytes = &bytes[take..];
        }
    }

    fn hello(&mut self) {
        if self.wire.client_hellos == 0 {
            self.wire.client_hello_bytes =
                5 + u32::from(u16::from_be_bytes([self.header[3], self.header[4]]));
        }
        self.wire.client_hellos += 1;
        self.read_since_hello = 0;
        self.flight_first = None;
        self.flight_last = None;
    }

    /// `n` bytes of the server's read.
    fn read(&mut self, n: usize) {
        if n == 0 || self.wire.client_hellos == 0 {
            return;
        }
        self.read_since_hello += n as u64;
        let now = std::time::Instant::now();
        self.flight_first.get_or_insert(now);
        self.flight_last = Some(now);
    }

    fn end(&mut self) {
        self.done = true;
        self.wire.server_flight_bytes = self.read_since_hello;
        if let (Some(a), Some(b)) = (self.flight_first, self.flight_last) {
            self.wire.server_flight_spread_ns = b.duration_since(a).as_nanos() as u64;
        }
    }
}

impl Tapped {
    pub(crate) fn new(tcp: Transport) -> Tapped {
        Tapped {
            tcp,
            tap: Some(Box::default()),
        }
    }

    /// The TCP connection beneath, when it is one.
    pub(crate) fn tcp(&self) -> Option<&tokio::net::TcpStream> {
        self.tcp.tcp()
    }

    /// What the handshake put on the wire; the tap stops (none after the first call).
    pub(crate) fn take_wire(&mut self) -> Option<Wire> {
        let tap = self.tap.take()?;
        let mut wire = tap.wire;
        if !tap.done {
            // Still in the handshake (early data pending): the flight is not known yet.
            wire.server_flight_bytes = 0;
            wire.server_flight_spread_ns = 0;
        }
        Some(wire)
    }
}

impl AsyncRead for Tapped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut me.tcp).poll_read(cx, buf);
        if let Some(tap) = me.tap.as_mut().filter(|t| !t.done) {
            tap.read(buf.filled().len() - before);
        }
        r
    }
}

impl AsyncWrite for Tapped {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.tcp).poll_write(cx, buf);
        if let (Poll::Ready(Ok(n)), Some(tap)) = (&r, me.tap.as_mut()) {
            tap.wrote(&buf[..*n]);
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.tcp).poll_write_vectored(cx, bufs);
        if let (Poll::Ready(Ok(n)), Some(tap)) = (&r, me.tap.as_mut()) {
            let mut left = *n;
            for b in bufs {
                let take = left.min(b.len());
                tap.wrote(&b[..take]);
                left -= take;
                if left == 0 {
                    break;
                }
            }
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TLS record of `typ` whose body is `body`.
    fn record(typ: u8, body: &[u8]) -> Vec<u8> {
        let mut r = vec![typ, 3, 3];
        r.extend_from_slice(&(body.len() as u16).to_be_bytes());
        r.extend_from_slice(body);
        r
    }

    /// A handshake message of `msg` type with `n` bytes of body.
    fn message(msg: u8, n: usize) -> Vec<u8> {
        let mut m = vec![msg, 0, (n >> 8) as u8, n as u8];
        m.resize(4 + n, 0xaa);
        m
    }

    fn tap(writes: &[(&[u8], u64)]) -> Tap {
        let mut t = Tap::default();
        for (bytes, then_read) in writes {
            // Written one byte at a time, as a short write would split it.
            for b in bytes.chunks(1) {
                t.wrote(b);
            }
            if !t.done {
                t.read_since_hello += then_read;
            }
        }
        t
    }

    #[test]
    fn a_retry_is_a_second_hello_and_the_flight_follows_it() {
        let hello = record(HANDSHAKE, &message(CLIENT_HELLO, 1450));
        let ccs = record(CHANGE_CIPHER_SPEC, &[1]);
        let finished = record(23, &[0x17; 53]);
        let t = tap(&[(&hello, 90), (&ccs, 0), (&hello, 2000), (&finished, 0)]);
        assert!(t.done);
        assert_eq!(t.wire.client_hellos, 2);
        assert_eq!(t.wire.client_hello_bytes, 5 + 4 + 1450);
        assert_eq!(t.wire.server_flight_bytes, 2000);
    }

    #[test]
    fn tls12_resumption_s_encrypted_finished_is_not_a_hello() {
        let hello = record(HANDSHAKE, &message(CLIENT_HELLO, 200));
        let ccs = record(CHANGE_CIPHER_SPEC, &[1]);
        // Encrypted bytes that happen to start with 1 (the ClientHello's type).
        let mut enc = vec![1u8; 40];
        enc[1..4].copy_from_slice(&[0x5c, 0x01, 0x99]);
        let finished = record(HANDSHAKE, &enc);
        let t = tap(&[(&hello, 150), (&ccs, 0), (&finished, 0)]);
        assert!(t.done);
        assert_eq!(t.wire.client_hellos, 1);
        assert_eq!(t.wire.server_flight_bytes, 150);
    }

    #[test]
    fn tls12_client_key_exchange_ends_the_flight() {
        let hello = record(HANDSHAKE, &message(CLIENT_HELLO, 200));
        let cke = record(HANDSHAKE, &message(16, 33));
        let t = tap(&[(&hello, 3000), (&cke, 5)]);
        assert!(t.done);
        assert_eq!(
            (t.wire.client_hellos, t.wire.server_flight_bytes),
            (1, 3000)
        );
    }
}
