//! One server connection: read request heads (with idle and header timeouts and size
//! limits), discard request bodies, answer, and keep or close per the reuse policy.

use std::io::Write as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout, Instant};

use super::Shared;
use crate::http1::ChunkedDecoder;

/// Bytes used to fill response bodies.
static FILL: [u8; 64 * 1024] = [b'x'; 64 * 1024];
const MAX_REQUEST_HEADERS: usize = 64;

pub(crate) async fn handle(
    sock: TcpStream,
    shared: &Shared,
    tls: Option<tokio_rustls::TlsAcceptor>,
    over_limit: bool,
) {
    match tls {
        None => serve(sock, shared, over_limit).await,
        Some(acceptor) => {
            let Ok(Ok(s)) = timeout(shared.cfg.header_timeout, acceptor.accept(sock)).await else {
                return;
            };
            let counter = match s.get_ref().1.handshake_kind() {
                Some(rustls::HandshakeKind::Resumed) => &shared.stats.tls_handshakes_resumed,
                _ => &shared.stats.tls_handshakes_full,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            serve(s, shared, over_limit).await
        }
    }
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// What the server took from one request head.
struct RequestInfo {
    minor: u8,
    path: String,
    head: bool,
    wants_close: bool,
    wants_keep_alive: bool,
    body: BodyKind,
    head_len: usize,
}

enum BodyKind {
    None,
    Length(u64),
    Chunked,
}

enum ParseOutcome {
    Complete(RequestInfo),
    Partial,
    /// Answer with this status and close.
    Reject(u16),
}

fn parse_request(buf: &[u8], max_header_bytes: usize) -> ParseOutcome {
    let mut headers = [httparse::EMPTY_HEADER; MAX_REQUEST_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() > max_header_bytes {
                ParseOutcome::Reject(431)
            } else {
                ParseOutcome::Partial
            }
        }
        Err(httparse::Error::TooManyHeaders) => return ParseOutcome::Reject(431),
        Err(_) => return ParseOutcome::Reject(400),
    };
    if head_len > max_header_bytes {
        return ParseOutcome::Reject(431);
    }
    let mut info = RequestInfo {
        minor: req.version.unwrap_or(1),
        path: req.path.unwrap_or("/").to_string(),
        head: req.method == Some("HEAD"),
        wants_close: false,
        wants_keep_alive: false,
        body: BodyKind::None,
        head_len,
    };
    let mut te = false;
    let mut cl: Option<u64> = None;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            info.wants_close |= has_token(h.value, "close");
            info.wants_keep_alive |= has_token(h.value, "keep-alive");
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let Some(v) = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
            else {
                return ParseOutcome::Reject(400);
            };
            if cl.is_some_and(|p| p != v) {
                return ParseOutcome::Reject(400);
            }
            cl = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if !h.value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                return ParseOutcome::Reject(501);
            }
            te = true;
        }
    }
    info.body = match (te, cl) {
        (true, Some(_)) => return ParseOutcome::Reject(400),
        (true, None) => BodyKind::Chunked,
        (false, Some(n)) if n > 0 => BodyKind::Length(n),
        _ => BodyKind::None,
    };
    ParseOutcome::Complete(info)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Read buffer of one connection.
struct Buf {
    data: Vec<u8>,
    start: usize,
    end: usize,
}

impl Buf {
    fn pending(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    async fn fill<S: AsyncRead + Unpin>(
        &mut self,
        s: &mut S,
        limit: usize,
    ) -> std::io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let grown = (self.data.len() * 2)
                    .min(limit + 1024)
                    .max(self.data.len() + 1);
                self.data.resize(grown, 0);
            }
        }
        let n = s.read(&mut self.data[self.end..]).await?;
        self.end += n;
        Ok(n)
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, shared: &Shared, over_limit: bool) {
    let cfg = &shared.cfg;
    let mut buf = Buf {
        data: vec![0; 8192],
        start: 0,
        end: 0,
    };
    let mut out: Vec<u8> = Vec::with_capacity(512);
    let mut served: u64 = 0;
    loop {
        // Wait for a request: the idle timeout runs until its first byte, the header
        // timeout from then until the head is complete.
        let mut head_deadline: Option<Instant> = None;
        let info = loop {
            if buf.end > buf.start {
                match parse_request(buf.pending(), cfg.max_header_bytes) {
                    ParseOutcome::Complete(i) => break i,
                    ParseOutcome::Partial => {}
                    ParseOutcome::Reject(code) => {
                        let _ = respond_error(&mut s, &mut out, code).await;
                        return;
                    }
                }
            }
            let read = match head_deadline {
                None if buf.end == buf.start => {
                    timeout(cfg.idle_timeout, buf.fill(&mut s, cfg.max_header_bytes)).await
                }
                _ => {
                    let d =
                        *head_deadline.get_or_insert_with(|| Instant::now() + cfg.header_timeout);
                    tokio::time::timeout_at(d, buf.fill(&mut s, cfg.max_header_bytes)).await
                }
            };
            match read {
                Err(_) if buf.end == buf.start => return, // idle timeout: close silently
                Err(_) => {
                    let _ = respond_error(&mut s, &mut out, 408).await;
                    return;
                }
                Ok(Err(_)) | Ok(Ok(0)) => return,
                Ok(Ok(_)) => {
                    if head_deadline.is_none() {
                        head_deadline = Some(Instant::now() + cfg.header_timeout);
                    }
                }
            }
        };
        buf.start += info.head_len;
        if over_limit {
            shared
                .stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            let _ = respond_error(&mut s, &mut out, 503).await;
            return;
        }
        // Discard the request body.
        match info.body {
            BodyKind::None => {}
            BodyKind::Length(n) => {
                if n > cfg.max_body_bytes {
                    let _ = respond_error(&mut s, &mut out, 413).await;
                    return;
                }
                let mut remaining = n;
                loop {
                    let take = ((buf.end - buf.start) as u64).min(remaining);
                    buf.start += take as usize;
                    remaining -= take;
                    if remaining == 0 {
                        break;
                    }
                    match timeout(cfg.header_timeout, buf.fill(&mut s, cfg.max_header_bytes)).await
                    {
                        Ok(Ok(n)) if n > 0 => {}
                        _ => return,
                    }
                }
            }
            BodyKind::Chunked => {
                let mut dec = ChunkedDecoder::new();
                let mut total = 0u64;
                loop {
                    let Ok(fed) = dec.feed(buf.pending()) else {
                        let _ = respond_error(&mut s, &mut out, 400).await;
                        return;
                    };
                    buf.start += fed.consumed;
                    total += fed.body_bytes;
                    if total > cfg.max_body_bytes {
                        let _ = respond_error(&mut s, &mut out, 413).await;
                        return;
                    }
                    if fed.done {
                        break;
                    }
                    match timeout(cfg.header_timeout, buf.fill(&mut s, cfg.max_header_bytes)).await
                    {
                        Ok(Ok(n)) if n > 0 => {}
                        _ => return,
                    }
                }
            }
        }
        served += 1;
        shared.stats.requests.fetch_add(1, Ordering::Relaxed);

        // Route.
        let path = info.path.split('?').next().unwrap_or("/");
        let mut status = 200u16;
        let mut body_len = cfg.body_size;
        let mut delay = cfg.delay;
        let mut stats_body: Option<Vec<u8>> = None;
        if path == "/__handshake/stats" {
            stats_body = serde_json::to_vec(&shared.stats.snapshot()).ok();
            body_len = stats_body.as_ref().map_or(0, |b| b.len());
        } else if let Some(n) = path.strip_prefix("/bytes/") {
            match n.parse::<usize>() {
                Ok(n) => body_len = n,
                Err(_) => status = 400,
            }
        } else if let Some(ms) = path.strip_prefix("/delay/") {
            match ms.parse::<u64>() {
                Ok(ms) => delay = Duration::from_millis(ms.min(600_000)),
                Err(_) => status = 400,
            }
        } else if let Some(code) = path.strip_prefix("/status/") {
            match code.parse::<u16>() {
                Ok(c) if (200..=999).contains(&c) => status = c,
                _ => status = 400,
            }
        }
        if status == 400 {
            body_len = 0;
        }
        let no_body = info.head || status == 204 || status == 304;

        // Reuse policy.
        let client_allows = if info.minor >= 1 {
            !info.wants_close
        } else {
            info.wants_keep_alive && !info.wants_close
        };
        let mut keep = cfg.keepalive && client_allows;
        if cfg.max_requests_per_connection.is_some_and(|m| served >= m) {
            keep = false;
        }
        out.clear();
        let version = if cfg.http10 { "HTTP/1.0" } else { "HTTP/1.1" };
        let _ = write!(out, "{version} {status} {}\r\n", reason(status));
        if status != 204 && status != 304 || info.head {
            let _ = write!(out, "Content-Length: {body_len}\r\n");
        }
        if stats_body.is_some() {
            out.extend_from_slice(b"Content-Type: application/json\r\n");
        } else {
            out.extend_from_slice(b"Content-Type: text/plain\r\n");
        }
        if cfg.http10 || info.minor == 0 {
            // A 1.0 exchange is persistent only with an explicit keep-alive.
            if keep {
                let _ = write!(
                    out,
                    "Connection: keep-alive\r\nKeep-Alive: timeout={}\r\n",
                    cfg.idle_timeout.as_secs()
                );
            } else if !cfg.http10 {
                out.extend_from_slice(b"Connection: close\r\n");
            }
        } else if !keep {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut body_left = if no_body { 0 } else { body_len };
        if let Some(b) = &stats_body {
            if !no_body {
                out.extend_from_slice(b);
            }
            body_left = 0;
        } else if body_left <= 16 * 1024 {
            out.extend_from_slice(&FILL[..body_left]);
            body_left = 0;
        }
        if s.write_all(&out).await.is_err() {
            return;
        }
        while body_left > 0 {
            let n = body_left.min(FILL.len());
            if s.write_all(&FILL[..n]).await.is_err() {
                return;
            }
            body_left -= n;
        }
        if s.flush().await.is_err() {
            return;
        }
        if !keep {
            let _ = s.shutdown().await;
            return;
        }
    }
}

async fn respond_error<S: AsyncWrite + Unpin>(
    s: &mut S,
    out: &mut Vec<u8>,
    status: u16,
) -> std::io::Result<()> {
    out.clear();
    let _ = write!(
        out,
        "HTTP/1.1 {status} {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        reason(status)
    );
    s.write_all(out).await?;
    s.flush().await?;
    s.shutdown().await
}
