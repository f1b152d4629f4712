//! What a TLS client's handshake puts on the wire, read off the TCP stream beneath
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

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::record::Wire;

/// TLS record content types.
const CHANGE_CIPHER_SPEC: u8 = 20;
const HANDSHAKE: u8 = 22;
/// The handshake message type of a ClientHello.
const CLIENT_HELLO: u8 = 1;

/// A TCP stream under a TLS client, its handshake's records watched until it is done.
pub struct Tapped {
    tcp: TcpStream,
    tap: Option<Box<Tap>>,
}

#[derive(Default)]
struct Tap {
    wire: Wire,
    /// The record header being gathered from what the client writes, and how many of
    /// its bytes are in.
    header: [u8; 5],
    have: usize,
    /// Bytes of the current record's body still to pass; whether its first is next.
    body_left: usize,
    first_of_body: bool,
    /// Bytes the server sent since the last ClientHello.
    read_since_hello: u64,
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
                    self.body_left =
                        usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                    self.first_of_body = true;
                    if self.header[0] != HANDSHAKE && self.header[0] != CHANGE_CIPHER_SPEC {
                        // Application data: TLS 1.3's encrypted Finished (or early data).
                        self.end();
                    }
                }
                continue;
            }
            if self.first_of_body && self.header[0] == HANDSHAKE {
                if bytes[0] == CLIENT_HELLO {
                    // A second one answers a HelloRetryRequest.
                    self.hello();
                } else {
                    // TLS 1.2's ClientKeyExchange.
                    self.end();
                    return;
                }
            }
            self.first_of_body = false;
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
    }

    fn end(&mut self) {
        self.done = true;
        self.wire.server_flight_bytes = self.read_since_hello;
    }
}

impl Tapped {
    pub fn new(tcp: TcpStream) -> Tapped {
        Tapped {
            tcp,
            tap: Some(Box::default()),
        }
    }

    /// What the handshake put on the wire; the tap stops (none after the first call).
    pub fn take_wire(&mut self) -> Option<Wire> {
        let tap = self.tap.take()?;
        let mut wire = tap.wire;
        if !tap.done {
            // Still in the handshake (early data pending): the flight is not known yet.
            wire.server_flight_bytes = 0;
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
            tap.read_since_hello += (buf.filled().len() - before) as u64;
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
