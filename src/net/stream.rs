//! One byte stream type for plain connections (TCP or a Unix socket) and TLS ones (enum dispatch, no boxing of I/O).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::client::TlsStream;

use super::tap::Tapped;
use super::transport::Transport;

pub(crate) enum Stream {
    Plain(Transport),
    Tls(Box<TlsStream<Tapped>>),
}

impl Stream {
    /// The TLS session, on a TLS stream.
    pub(crate) fn tls_session(&self) -> Option<&rustls::ClientConnection> {
        match self {
            Stream::Tls(t) => Some(t.get_ref().1),
            Stream::Plain(_) => None,
        }
    }

    /// Plain TCP (no TLS): the bytes read are the bytes the kernel received.
    pub(crate) fn is_plain(&self) -> bool {
        matches!(self, Stream::Plain(Transport::Tcp(_)))
    }

    /// The kernel's view of the TCP connection beneath.
    pub(crate) fn tcp_view(&self) -> Option<super::kernel::TcpView> {
        match self {
            Stream::Plain(s) => super::kernel::tcp_view(s.tcp()?),
            Stream::Tls(t) => super::kernel::tcp_view(t.get_ref().0.tcp()?),
        }
    }

    /// What the TLS handshake put on the wire (once; none on TCP).
    pub(crate) fn take_wire(&mut self) -> Option<crate::record::Wire> {
        match self {
            Stream::Tls(t) => t.get_mut().0.take_wire(),
            Stream::Plain(_) => None,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
