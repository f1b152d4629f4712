//! The embedded server's TLS when it accepts early data (`--early-data on`): tokio-rustls
//! completes a server handshake before anything is read, and has no way to read the
//! client's 0-RTT data, so this drives rustls' `ServerConnection` over the socket itself
//! (rustls does the TLS; this only moves bytes). The handshake is taken as far as the
//! server's first flight; a request in early data is then read at once and answered as
//! 0.5-RTT data (`send_half_rtt_data`), a round trip before the client's Finished.

use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use rustls::ServerConnection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::stream::ServerStream;

/// A server TLS stream over a socket; reads give the early data first.
pub(super) struct EarlyTls {
    io: ServerStream,
    conn: ServerConnection,
    /// Early-data bytes read by the application so far.
    pub early_bytes: u64,
    eof: bool,
    /// Counted in the server's stats when the first early byte is read: a request came
    /// in early data.
    stats: Arc<super::ServerStats>,
}

/// `std::io::Read`/`Write` on a nonblocking socket for rustls: `WouldBlock` when it
/// would wait (the caller then waits for readiness).
struct TryIo<'a>(&'a ServerStream);

impl Read for TryIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for TryIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn tls_err(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl EarlyTls {
    /// Start the handshake and take it as far as it goes without the client's
    /// Finished: done, or waiting with early data accepted (to be read now).
    pub(super) async fn accept(
        io: ServerStream,
        config: Arc<rustls::ServerConfig>,
        stats: Arc<super::ServerStats>,
    ) -> io::Result<EarlyTls> {
        let conn = ServerConnection::new(config).map_err(tls_err)?;
        let mut s = EarlyTls {
            io,
            conn,
            early_bytes: 0,
            eof: false,
            stats,
        };
        std::future::poll_fn(|cx| s.poll_accept(cx)).await?;
        Ok(s)
    }

    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.poll_write_tls(cx))?;
            if !self.conn.is_handshaking() || self.conn.early_data().is_some() {
                return Poll::Ready(Ok(()));
            }
            if ready!(self.poll_read_tls(cx))? == 0 {
                return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
            }
        }
    }

    pub(super) fn session(&self) -> &ServerConnection {
        &self.conn
    }

    pub(super) fn socket_mut(&mut self) -> &mut ServerStream {
        &mut self.io
    }

    /// Write what rustls has to send; Pending only when the socket is full.
    fn poll_write_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut TryIo(&self.io)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.io.poll_write_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Read TLS records from the socket and process them; Ok(0) at EOF.
    fn poll_read_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        loop {
            match self.conn.read_tls(&mut TryIo(&self.io)) {
                Ok(n) => {
                    if let Err(e) = self.conn.process_new_packets() {
                        // Send the alert rustls queued, then fail.
                        let _ = self.conn.write_tls(&mut TryIo(&self.io));
                        return Poll::Ready(Err(tls_err(e)));
                    }
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.io.poll_read_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncRead for EarlyTls {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        loop {
            if let Some(mut early) = me.conn.early_data() {
                let n = early.read(buf.initialize_unfilled())?;
                if n > 0 {
                    buf.advance(n);
                    if me.early_bytes == 0 {
                        me.stats
                            .early_data_requests
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    me.early_bytes += n as u64;
                    return Poll::Ready(Ok(()));
                }
            }
            match me.conn.reader().read(buf.initialize_unfilled()) {
                Ok(n) => {
                    // 0: the client's close_notify.
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    // Closed without close_notify: EOF as the HTTP layer sees it.
                    return Poll::Ready(Ok(()));
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
            if me.eof {
                return Poll::Ready(Ok(()));
            }
            // Handshake replies (and tickets) go out before waiting for more.
            if let Poll::Ready(Err(e)) = me.poll_write_tls(cx) {
                return Poll::Ready(Err(e));
            }
            if ready!(me.poll_read_tls(cx))? == 0 {
                me.eof = true;
            }
        }
    }
}

impl AsyncWrite for EarlyTls {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let n = me.conn.writer().write(buf)?;
        // Push what can go now; the rest goes with the flush.
        if let Poll::Ready(Err(e)) = me.poll_write_tls(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        me.conn.writer().flush()?;
        ready!(me.poll_write_tls(cx))?;
        Pin::new(&mut me.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        // A response sent as 0.5-RTT data may end the connection before the client's
        // Finished came: take it first, so the session tickets (sent after it) reach
        // the client for its next connection.
        while me.conn.is_handshaking() && !me.eof {
            ready!(me.poll_write_tls(cx))?;
            if ready!(me.poll_read_tls(cx))? == 0 {
                me.eof = true;
            }
        }
        me.conn.send_close_notify();
        ready!(me.poll_write_tls(cx))?;
        Pin::new(&mut me.io).poll_shutdown(cx)
    }
}
