//! One client connection: its stream, its read buffer, and reading one response
//! (skipping 1xx, framing the body) without keeping body bytes.

use std::cell::RefCell;
use std::io;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::net::{classify_io_failure, Stream, Transport};
pub(crate) use crate::proto::h1::reading::ReadFail;
use crate::proto::h1::reading::Reading;
use crate::proto::h1::{ResponseHead, MAX_HEAD_BYTES};
use crate::proto::pace::{Pace, ReadLimits};
use crate::record::notes::Taken;
use crate::record::ErrorDetail;

/// Initial read buffer; grows (up to the head limit) only for very long heads.
const INITIAL_BUF: usize = 16 * 1024;

/// Read buffers kept by a thread for its next reads: a connection over a stream that can
/// say when bytes are there ([`WaitReadable`]) holds one only while a response arrives,
/// so idle connections (most of them, at thousands) cost no buffer. Bounded: more than
/// this many spare buffers are freed.
const SPARE_BUFS: usize = 64;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A read buffer: a spare one of this thread, or a new one.
pub(crate) fn take_buf() -> Vec<u8> {
    SPARE
        .with_borrow_mut(Vec::pop)
        .unwrap_or_else(|| vec![0; INITIAL_BUF])
}

/// Keep `buf` for this thread's next reads (shrunk to its initial size if a long head
/// grew it); freed if the thread keeps enough.
pub(crate) fn give_buf(mut buf: Vec<u8>) {
    if buf.is_empty() {
        return;
    }
    if buf.len() > INITIAL_BUF {
        buf.truncate(INITIAL_BUF);
        buf.shrink_to_fit();
    }
    SPARE.with_borrow_mut(|spare| {
        if spare.len() < SPARE_BUFS {
            spare.push(buf);
        }
    });
}

/// Room at the end of `buf` for the next read, where the bytes not yet taken are
/// `start..end`: at the start when all were taken, moved to the front when the end is
/// reached, and the buffer grown (up to the head limit) when they fill it (a long head).
pub(crate) fn make_room(buf: &mut Vec<u8>, start: &mut usize, end: &mut usize) {
    if *start == *end {
        *start = 0;
        *end = 0;
    } else if *end == buf.len() {
        if *start > 0 {
            buf.copy_within(*start..*end, 0);
            *end -= *start;
            *start = 0;
        } else {
            let grown = (buf.len() * 2).min(MAX_HEAD_BYTES + 1024);
            buf.resize(grown, 0);
        }
    }
}

/// A stream that can wait until a read would find bytes without being handed a buffer
/// (plain TCP and Unix sockets); TLS cannot tell (its records are read into its own
/// buffers), and a connection over it keeps its read buffer.
pub trait WaitReadable {
    /// This stream can wait for bytes without a buffer.
    fn waits_readable(&self) -> bool {
        false
    }

    /// Ready when a read would find bytes (or the end, or an error).
    fn poll_wait_readable(&self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl WaitReadable for Stream {
    fn waits_readable(&self) -> bool {
        matches!(self, Stream::Plain(Transport::Tcp(_) | Transport::Unix(_)))
    }

    fn poll_wait_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Stream::Plain(Transport::Tcp(s)) => s.poll_read_ready(cx),
            Stream::Plain(Transport::Unix(s)) => s.poll_read_ready(cx),
            _ => Poll::Ready(Ok(())),
        }
    }
}

/// Generic over its stream so the response reader can be fuzzed over in-memory input;
/// the engine always uses [`Stream`] (the fuzz targets name their own, so the default
/// stays the crate's).
#[allow(private_interfaces)]
pub struct Conn<S = Stream> {
    pub stream: S,
    /// Empty between responses when the stream can wait for bytes without it (`lends`).
    buf: Vec<u8>,
    /// The read buffer goes back to the thread's spares after each response.
    lends: bool,
    start: usize,
    end: usize,
    /// Responses completed on this connection.
    pub requests: u64,
    /// A byte of the current response has arrived (a timeout now is in `receive`).
    pub receiving: bool,
    /// Keep a copy of each final response head in `last_head` (for `trace`/`doctor`;
    /// off in load runs).
    pub keep_head: bool,
    pub last_head: Vec<u8>,
    /// Bytes of the current (or last) response read so far, head and body: kept on the
    /// connection so an attempt that fails or times out still reports what arrived.
    pub got_bytes: u64,
    pub got_body_bytes: u64,
    /// Bytes read from the stream over the connection's life.
    pub read_total: u64,
    /// Keep a redirect's `Location` in its response (`-L`).
    pub follow: bool,
}

/// A complete response.
#[derive(Debug)]
pub struct Response {
    pub head: ResponseHead,
    pub first_byte: Instant,
    pub end: Instant,
    pub body_bytes: u64,
    /// Head and body bytes read.
    pub bytes: u64,
    /// Bytes arrived after the end of the response (the connection cannot be reused).
    pub leftover: bool,
    /// The server's EOF was already seen (close-delimited body).
    pub eof: bool,
    /// A redirect's `Location` (301, 302, 303, 307, 308), when the connection follows
    /// redirects.
    pub location: Option<Box<str>>,
    /// What a 3xx to 5xx response said, where `taken` wanted its example.
    pub said: Option<Box<str>>,
}

impl<S: AsyncRead + AsyncWrite + WaitReadable + Unpin> Conn<S> {
    /// A connection over `stream`. Read buffers are the thread's spares, given back when
    /// the connection ends (no allocation per connection), and between responses when
    /// the stream can wait for bytes without one.
    pub fn new(stream: S) -> Conn<S> {
        let lends = stream.waits_readable();
        Conn {
            stream,
            buf: if lends { Vec::new() } else { take_buf() },
            lends,
            start: 0,
            end: 0,
            requests: 0,
            receiving: false,
            keep_head: false,
            last_head: Vec::new(),
            got_bytes: 0,
            got_body_bytes: 0,
            read_total: 0,
            follow: false,
        }
    }

    /// The stream, for another protocol to take over (nothing must be buffered).
    pub(crate) fn into_stream(self) -> S {
        give_buf(self.buf);
        self.stream
    }

    /// The connection ends: its read buffer goes to the thread's spares.
    pub(crate) fn recycle(self) {
        give_buf(self.buf);
    }

    /// Write the request (and flush it, which TLS needs to send its last record).
    pub(crate) async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// Write without flushing (with TLS early data: into the first flight).
    pub(crate) async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await
    }

    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        self.stream.flush().await
    }

    /// Read more bytes into the buffer; Ok(0) is EOF. A connection that lends its buffer
    /// out between responses waits for bytes first and then takes one.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.buf.is_empty() {
            std::future::poll_fn(|cx| self.stream.poll_wait_readable(cx)).await?;
            self.buf = take_buf();
        }
        make_room(&mut self.buf, &mut self.start, &mut self.end);
        let n = self.stream.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        self.read_total += n as u64;
        Ok(n)
    }

    /// Like `fill`, under the wait and minimum-speed limits. A reset is reported with
    /// `reset_detail` (in the head or in the body).
    async fn fill_paced(
        &mut self,
        pace: &mut Option<Pace>,
        reset_detail: ErrorDetail,
        any_byte: bool,
    ) -> Result<usize, ReadFail> {
        loop {
            let read = match pace.as_ref().and_then(Pace::deadline) {
                None => self.fill().await,
                Some(by) => match tokio::time::timeout_at(by.into(), self.fill()).await {
                    Ok(r) => r,
                    Err(_) => {
                        if let Some(p) = pace.as_mut() {
                            p.expired(Instant::now())
                                .map_err(|failure| ReadFail { failure, any_byte })?;
                        }
                        continue;
                    }
                },
            };
            let n = read.map_err(|e| ReadFail {
                failure: classify_io_failure(&e, reset_detail),
                any_byte,
            })?;
            if let Some(p) = pace.as_mut().filter(|_| n > 0) {
                p.on_bytes(n, Instant::now()).map_err(|failure| ReadFail {
                    failure,
                    any_byte: true,
                })?;
            }
            return Ok(n);
        }
    }

    /// Read one response. The buffer is empty on entry (responses are never pipelined).
    /// `taken`: the statuses whose example the reader's worker has.
    pub async fn read_response(
        &mut self,
        head_request: bool,
        limits: ReadLimits,
        taken: Taken,
    ) -> Result<Response, ReadFail> {
        let mut first_byte = None;
        self.got_bytes = 0;
        self.got_body_bytes = 0;
        self.receiving = false;
        let mut pace = Pace::new(limits);
        let mut reading = Reading::new(head_request, self.keep_head, self.follow);
        reading.taken = taken;
        let mut eof = false;
        loop {
            let (used, done) = reading.advance(&self.buf[self.start..self.end])?;
            self.start += used;
            self.got_body_bytes = reading.body_bytes;
            if done {
                break;
            }
            let any_byte = self.got_bytes > 0;
            let n = self
                .fill_paced(&mut pace, reading.reset_detail(), any_byte)
                .await?;
            if n == 0 {
                reading.at_eof(any_byte)?;
                eof = true;
                break;
            }
            if first_byte.is_none() {
                first_byte = Some(Instant::now());
                self.receiving = true;
            }
            self.got_bytes += n as u64;
        }
        let end = Instant::now();
        let leftover = self.end > self.start;
        self.start = 0;
        self.end = 0;
        if self.lends {
            give_buf(std::mem::take(&mut self.buf));
        }
        if let Some(h) = reading.kept_head.take() {
            self.last_head = h;
        }
        let location = reading.location.take();
        let said = reading.said.take();
        let head = reading
            .into_head()
            .expect("a complete response has its head");
        Ok(Response {
            head,
            first_byte: first_byte.unwrap_or(end),
            end,
            body_bytes: self.got_body_bytes,
            bytes: self.got_bytes,
            leftover,
            eof,
            location,
            said,
        })
    }

    /// After a response that ends the connection from the server's side, wait for its
    /// EOF so the server closes first (TIME_WAIT stays on the server, as with curl and ab).
    pub(crate) async fn await_server_close(&mut self) -> bool {
        if self.buf.is_empty() {
            self.buf = take_buf();
        }
        loop {
            match self.stream.read(&mut self.buf).await {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// Over plain TCP an idle connection holds no read buffer: it takes one of the
    /// thread's spares when bytes arrive and gives it back with the response; over a
    /// stream that cannot wait for bytes (TLS, here an in-memory pipe) it keeps its own.
    #[tokio::test(flavor = "current_thread")]
    async fn idle_connections_over_tcp_hold_no_read_buffer() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            for _ in 0..2 {
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
                    .await
                    .unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut conn = Conn::new(Stream::Plain(Transport::Tcp(tcp)));
        assert!(
            conn.lends && conn.buf.capacity() == 0,
            "no buffer before a response"
        );
        for _ in 0..2 {
            let r = conn
                .read_response(false, ReadLimits::default(), Taken::default())
                .await
                .expect("a response");
            assert_eq!((r.head.status, r.body_bytes, r.leftover), (200, 5, false));
            assert_eq!(
                conn.buf.capacity(),
                0,
                "the buffer went back with the response"
            );
        }
        assert!(
            SPARE.with_borrow(|s| !s.is_empty()),
            "kept for the next read"
        );
        server.await.unwrap();

        let (a, mut b) = tokio::io::duplex(4096);
        let mut piped = Conn::new(Piped(a));
        b.write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
            .await
            .unwrap();
        let r = piped
            .read_response(false, ReadLimits::default(), Taken::default())
            .await
            .unwrap();
        assert_eq!(r.head.status, 204);
        assert!(
            !piped.lends && piped.buf.len() == INITIAL_BUF,
            "kept its own"
        );
    }

    struct Piped(tokio::io::DuplexStream);

    impl WaitReadable for Piped {}

    impl AsyncRead for Piped {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Piped {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            std::pin::Pin::new(&mut self.0).poll_write(cx, buf)
        }

        fn poll_flush(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.0).poll_flush(cx)
        }

        fn poll_shutdown(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<io::Result<()>> {
            std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
        }
    }
}
