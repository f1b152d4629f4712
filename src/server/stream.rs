//! An accepted connection, watched by the runtime's reactor for reading only until a
//! write would block.
//!
//! Tokio's `TcpStream` registers every socket for reads and writes. A new socket is
//! writable at once, so the reactor's next wait returns that edge alone, before the
//! client's request arrives: a wake-up for nothing on most connections of a load test
//! that opens one per request. nginx registers for reads and asks for writes only
//! when a write would block; this does the same. A response that fits the socket's
//! send buffer is written straight away, without waiting for readiness.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

pub(crate) struct ServerStream {
    /// None only while the registration is being replaced.
    io: Option<AsyncFd<std::net::TcpStream>>,
    /// Registered for writes too (after a write that would block).
    writes: bool,
    /// The connection closes after these writes: send with `MSG_MORE`.
    last: bool,
}

fn register(
    s: std::net::TcpStream,
    interest: Interest,
) -> io::Result<AsyncFd<std::net::TcpStream>> {
    crate::sys::async_fd(s, interest)
}

impl ServerStream {
    /// `s` must be nonblocking.
    pub(crate) fn new(s: std::net::TcpStream) -> io::Result<ServerStream> {
        Ok(ServerStream {
            io: Some(register(s, Interest::READABLE)?),
            writes: false,
            last: false,
        })
    }

    fn fd(&self) -> &AsyncFd<std::net::TcpStream> {
        self.io.as_ref().expect("registered")
    }

    pub(crate) fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.fd().get_ref().set_nodelay(on)
    }

    /// The writes from here on are the connection's last: each is sent with `MSG_MORE`,
    /// so the kernel holds a tail shorter than a segment until the close, and the
    /// response's end and the FIN leave in one segment instead of two (one packet less
    /// for both sides to process, on a connection per request).
    pub(crate) fn last_writes(&mut self) {
        self.last = true;
    }

    /// Read what the socket has; `WouldBlock` when it has nothing.
    pub(crate) fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.fd().get_ref().read(buf)
    }

    /// Write what the socket takes; `WouldBlock` when it is full.
    pub(crate) fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        send(self.fd().get_ref(), buf, self.last)
    }

    /// Ready when the socket may have something to read (then try it again).
    pub(crate) fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut guard = ready!(self.fd().poll_read_ready(cx))?;
        guard.clear_ready();
        Poll::Ready(Ok(()))
    }

    /// Ready when the socket may take more (then try it again). The first call asks
    /// the reactor for writes.
    pub(crate) fn poll_write_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.watch_writes()?;
        let mut guard = ready!(self.fd().poll_write_ready(cx))?;
        guard.clear_ready();
        Poll::Ready(Ok(()))
    }

    fn watch_writes(&mut self) -> io::Result<()> {
        if !self.writes {
            let s = self.io.take().expect("registered").into_inner();
            self.io = Some(register(s, Interest::READABLE | Interest::WRITABLE)?);
            self.writes = true;
        }
        Ok(())
    }
}

impl AsyncRead for ServerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let fd = self.fd();
        loop {
            let mut guard = ready!(fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let want = unfilled.len();
            match guard.try_io(|s| s.get_ref().read(unfilled)) {
                Ok(Ok(n)) => {
                    // Edge-triggered: a short read emptied the socket, so the next one
                    // waits for the reactor instead of trying and getting WouldBlock.
                    if n > 0 && n < want {
                        guard.clear_ready();
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

fn send(s: &std::net::TcpStream, buf: &[u8], more: bool) -> io::Result<usize> {
    if more {
        socket2::SockRef::from(s).send_with_flags(buf, libc::MSG_MORE)
    } else {
        (&*s).write(buf)
    }
}

fn send_vectored(
    s: &std::net::TcpStream,
    bufs: &[io::IoSlice<'_>],
    more: bool,
) -> io::Result<usize> {
    if more {
        socket2::SockRef::from(s).send_vectored_with_flags(bufs, libc::MSG_MORE)
    } else {
        (&*s).write_vectored(bufs)
    }
}

impl ServerStream {
    /// One write (`f` on the socket) of `len` bytes: straight away until a write would
    /// block, then when the reactor says the socket takes more.
    fn poll_write_with(
        &mut self,
        cx: &mut Context<'_>,
        len: usize,
        f: impl Fn(&std::net::TcpStream) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        if !self.writes {
            match f(self.fd().get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return Poll::Ready(done),
            }
            self.watch_writes()?;
        }
        let fd = self.fd();
        loop {
            let mut guard = ready!(fd.poll_write_ready(cx))?;
            match guard.try_io(|s| f(s.get_ref())) {
                Ok(Ok(n)) => {
                    // A short write filled the socket: wait for the reactor next time.
                    if n > 0 && n < len {
                        guard.clear_ready();
                    }
                    return Poll::Ready(Ok(n));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for ServerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let more = self.last;
        self.get_mut()
            .poll_write_with(cx, buf.len(), |s| send(s, buf, more))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        let more = self.last;
        self.get_mut()
            .poll_write_with(cx, len, |s| send_vectored(s, bufs, more))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.fd().get_ref().shutdown(Shutdown::Write))
    }
}
