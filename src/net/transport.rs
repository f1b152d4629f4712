//! The byte stream beneath HTTP (and beneath TLS to the origin): a TCP connection, a
//! Unix domain socket's (`--unix-socket`), or TLS to an https:// proxy over TCP. Enum
//! dispatch, no boxing of I/O but the proxy's TLS state.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

pub(crate) enum Transport {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// TLS to an https:// forward proxy; the origin's TLS (if any) runs inside it.
    ProxyTls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Transport {
    /// The TCP connection, when it is one (a Unix socket has no TCP state to read).
    pub(crate) fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Transport::Tcp(s) => Some(s),
            Transport::Unix(_) => None,
            Transport::ProxyTls(s) => Some(s.get_ref().0),
        }
    }
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Transport::ProxyTls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Transport::ProxyTls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::ProxyTls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Tcp(s) => s.is_write_vectored(),
            Transport::Unix(s) => s.is_write_vectored(),
            Transport::ProxyTls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_flush(cx),
            Transport::Unix(s) => Pin::new(s).poll_flush(cx),
            Transport::ProxyTls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Transport::ProxyTls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
