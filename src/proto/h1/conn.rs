//! One client connection: its stream, its read buffer, and reading one response
//! (skipping 1xx, framing the body) without keeping body bytes.

use std::io;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::net::{classify_io_failure, Stream};
use crate::proto::h1::{
    parse_head, ChunkError, ChunkedDecoder, Framing, ResponseHead, MAX_HEAD_BYTES,
};
use crate::proto::pace::{Pace, ReadLimits};
use crate::record::{ErrorDetail, ErrorKind, Failure};

/// Initial read buffer; grows (up to the head limit) only for very long heads.
const INITIAL_BUF: usize = 16 * 1024;

/// Generic over its stream so the response reader can be fuzzed over in-memory input;
/// the engine always uses [`Stream`].
pub struct Conn<S = Stream> {
    pub stream: S,
    buf: Vec<u8>,
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
}

/// Why reading a response failed.
#[derive(Debug)]
pub struct ReadFail {
    pub failure: Failure,
    /// Some response byte had arrived (if not, a reused connection may just be stale).
    pub any_byte: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    /// A connection over `stream`, reading into `buf` if one is handed over (buffers
    /// are recycled from closed connections: no allocation per connection).
    pub fn new(stream: S, buf: Option<Vec<u8>>) -> Conn<S> {
        let buf = buf.unwrap_or_else(|| vec![0; INITIAL_BUF]);
        Conn {
            stream,
            buf,
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
    pub fn into_stream(self) -> S {
        self.stream
    }

    /// Give back the read buffer (shrunk to its initial size if a long head grew it).
    pub fn into_buf(self) -> Vec<u8> {
        let mut buf = self.buf;
        if buf.len() > INITIAL_BUF {
            buf.truncate(INITIAL_BUF);
            buf.shrink_to_fit();
        }
        buf
    }

    /// Write the request (and flush it, which TLS needs to send its last record).
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }

    /// Write without flushing (with TLS early data: into the first flight).
    pub async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await
    }

    pub async fn flush(&mut self) -> io::Result<()> {
        self.stream.flush().await
    }

    /// Read more bytes into the buffer; Ok(0) is EOF.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let grown = (self.buf.len() * 2).min(MAX_HEAD_BYTES + 1024);
                self.buf.resize(grown, 0);
            }
        }
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
    // The client's hot path: one response read as one state machine (head, then the
    // body by its framing), each read's timing and failure kept in one frame.
    #[allow(clippy::too_many_lines)]
    pub async fn read_response(
        &mut self,
        head_request: bool,
        limits: ReadLimits,
    ) -> Result<Response, ReadFail> {
        let mut first_byte = None;
        self.got_bytes = 0;
        self.got_body_bytes = 0;
        self.receiving = false;
        let mut pace = Pace::new(limits);
        let fail = |kind, detail, any_byte| ReadFail {
            failure: Failure::new(kind, detail),
            any_byte,
        };
        let mut location_kept = None;
        let head = loop {
            if self.end > self.start {
                match parse_head(&self.buf[self.start..self.end], head_request) {
                    Ok(Some(h)) => {
                        if self.keep_head && !h.is_informational() {
                            self.last_head.clear();
                            self.last_head
                                .extend_from_slice(&self.buf[self.start..self.start + h.head_len]);
                        }
                        if h.status >= 300 && crate::record::notes::wants_status_example(h.status) {
                            // The first redirect or error response of its status on this
                            // thread: what it said (a redirect's Location; an error's first
                            // body bytes that arrived with the head).
                            let head = &self.buf[self.start..self.start + h.head_len];
                            let line = head.split(|b| *b == b'\n').next().unwrap_or(head);
                            let said = if h.status < 400 {
                                location(head).unwrap_or_default()
                            } else {
                                &self.buf[self.start + h.head_len..self.end]
                            };
                            crate::record::notes::note_status(h.status, line, said);
                        }
                        // Only a redirect's head is searched (with -L).
                        if self.follow && crate::proto::is_redirect(h.status) {
                            let head = &self.buf[self.start..self.start + h.head_len];
                            location_kept =
                                crate::proto::redirect_location(h.status, location(head));
                        }
                        self.start += h.head_len;
                        if h.status == 101 {
                            return Err(fail(
                                ErrorKind::Protocol,
                                ErrorDetail::UnrequestedUpgrade,
                                true,
                            ));
                        }
                        if h.is_informational() {
                            continue;
                        }
                        break h;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        crate::record::notes::note_error(e.failure(), e.message());
                        return Err(ReadFail {
                            failure: e.failure(),
                            any_byte: true,
                        });
                    }
                }
            }
            let n = self
                .fill_paced(&mut pace, ErrorDetail::ResetInHead, self.got_bytes > 0)
                .await?;
            if n == 0 {
                let detail = if self.got_bytes > 0 {
                    ErrorDetail::EofInHead
                } else {
                    ErrorDetail::EmptyReply
                };
                return Err(fail(
                    ErrorKind::ClosedBeforeResponse,
                    detail,
                    self.got_bytes > 0,
                ));
            }
            if first_byte.is_none() {
                first_byte = Some(Instant::now());
                self.receiving = true;
            }
            self.got_bytes += n as u64;
        };
        let first_byte = first_byte.unwrap_or_else(Instant::now);
        let mut eof = false;
        match head.framing {
            Framing::None => {}
            Framing::Length(len) => {
                let mut remaining = len;
                loop {
                    let avail = (self.end - self.start) as u64;
                    let take = avail.min(remaining);
                    self.start += take as usize;
                    remaining -= take;
                    self.got_body_bytes += take;
                    if remaining == 0 {
                        break;
                    }
                    let n = self
                        .fill_paced(&mut pace, ErrorDetail::ResetInBody, true)
                        .await?;
                    if n == 0 {
                        return Err(fail(
                            ErrorKind::BodyIncomplete,
                            ErrorDetail::ShortBody,
                            true,
                        ));
                    }
                    self.got_bytes += n as u64;
                }
            }
            Framing::Chunked => {
                let mut dec = ChunkedDecoder::new();
                loop {
                    let fed = dec
                        .feed(&self.buf[self.start..self.end])
                        .map_err(|e| match e {
                            ChunkError::Invalid(_) => {
                                fail(ErrorKind::Protocol, ErrorDetail::BadChunk, true)
                            }
                            ChunkError::TooLarge(_) => {
                                fail(ErrorKind::TooLarge, ErrorDetail::ChunkTooLarge, true)
                            }
                        })?;
                    self.start += fed.consumed;
                    self.got_body_bytes += fed.body_bytes;
                    if fed.done {
                        break;
                    }
                    let n = self
                        .fill_paced(&mut pace, ErrorDetail::ResetInBody, true)
                        .await?;
                    if n == 0 {
                        return Err(fail(
                            ErrorKind::BodyIncomplete,
                            ErrorDetail::MissingLastChunk,
                            true,
                        ));
                    }
                    self.got_bytes += n as u64;
                }
            }
            Framing::UntilClose => {
                self.got_body_bytes += (self.end - self.start) as u64;
                self.start = self.end;
                loop {
                    let n = self
                        .fill_paced(&mut pace, ErrorDetail::ResetInBody, true)
                        .await?;
                    if n == 0 {
                        eof = true;
                        break;
                    }
                    self.got_bytes += n as u64;
                    self.got_body_bytes += n as u64;
                    self.start = self.end;
                }
            }
        }
        let end = Instant::now();
        let leftover = self.end > self.start;
        self.start = 0;
        self.end = 0;
        Ok(Response {
            head,
            first_byte,
            end,
            body_bytes: self.got_body_bytes,
            bytes: self.got_bytes,
            leftover,
            eof,
            location: location_kept,
        })
    }

    /// After a response that ends the connection from the server's side, wait for its
    /// EOF so the server closes first (TIME_WAIT stays on the server, as with curl and ab).
    pub async fn await_server_close(&mut self) -> bool {
        let mut scratch = [0u8; 512];
        loop {
            match self.stream.read(&mut scratch).await {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    }
}

/// The value of a response head's `Location` header, if it has one.
fn location(head: &[u8]) -> Option<&[u8]> {
    head.split(|b| *b == b'\n').find_map(|l| {
        let (name, value) = l.split_at(l.iter().position(|b| *b == b':')?);
        name.eq_ignore_ascii_case(b"location")
            .then(|| value[1..].trim_ascii())
    })
}
