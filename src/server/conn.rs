//! One server connection: read request heads (with idle and header timeouts and size
//! limits), discard request bodies, answer, and keep or close per the reuse policy.

use std::io::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::timeout;

use super::routes::{
    answer, reason, route_of, write_head, Answer, ConnHeader, Route, FILL, INLINE_BODY,
};
use super::stream::ServerStream;
use super::Shared;
use crate::proto::h1::{has_token, ChunkedDecoder};
use crate::proto::h2::PREFACE_START;
use crate::timer::within;

const MAX_REQUEST_HEADERS: usize = 64;

pub(crate) async fn handle(
    sock: ServerStream,
    shared: &Arc<Shared>,
    tls: Option<Arc<rustls::ServerConfig>>,
    over_limit: bool,
) {
    match tls {
        None => {
            // Plain TCP: close() sends the FIN itself, no separate shutdown() needed.
            serve(sock, shared, over_limit, false).await
        }
        // Boxed: the TLS state is large, and plain connections should not carry its
        // size in every task.
        Some(cfg) if shared.cfg.early_data => {
            Box::pin(handle_early(sock, shared, cfg, over_limit)).await
        }
        Some(cfg) => Box::pin(handle_tls(sock, shared, cfg.into(), over_limit)).await,
    }
}

/// TLS with early data: the handshake driven here, so a 0-RTT request is read and
/// answered before the client's Finished.
async fn handle_early(
    sock: ServerStream,
    shared: &Arc<Shared>,
    cfg: Arc<rustls::ServerConfig>,
    over_limit: bool,
) {
    let _ = sock.set_nodelay(true);
    let accept = super::early::EarlyTls::accept(sock, cfg, shared.stats.clone());
    let Ok(Ok(s)) = timeout(shared.cfg.header_timeout, accept).await else {
        return;
    };
    handshake_done(&shared.stats, s.session());
    if s.session().alpn_protocol() == Some(b"h2".as_slice()) {
        return super::h2::serve(s, shared.clone(), true).await;
    }
    serve(s, shared, over_limit, true).await
}

/// A TLS handshake done, counted: full or resumed, and a full one in which the client
/// presented a certificate.
fn handshake_done(stats: &super::ServerStats, c: &rustls::ServerConnection) {
    let resumed = c.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    let counter = if resumed {
        &stats.tls_handshakes_resumed
    } else {
        &stats.tls_handshakes_full
    };
    counter.fetch_add(1, Ordering::Relaxed);
    if !resumed && c.peer_certificates().is_some() {
        stats
            .tls_client_certificates
            .fetch_add(1, Ordering::Relaxed);
    }
}

async fn handle_tls(
    sock: ServerStream,
    shared: &Arc<Shared>,
    acceptor: tokio_rustls::TlsAcceptor,
    over_limit: bool,
) {
    let Ok(Ok(s)) = timeout(shared.cfg.header_timeout, acceptor.accept(sock)).await else {
        return;
    };
    handshake_done(&shared.stats, s.get_ref().1);
    let _ = s.get_ref().0.set_nodelay(true);
    if s.get_ref().1.alpn_protocol() == Some(b"h2".as_slice()) {
        return super::h2::serve(s, shared.clone(), true).await;
    }
    serve(s, shared, over_limit, true).await
}

/// What the server took from one request head.
struct RequestInfo {
    minor: u8,
    route: Route,
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
        route: route_of(req.path.unwrap_or("/")),
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

    /// Read more before `deadline`; false on timeout, EOF or error.
    async fn fill_by<S: AsyncRead + Unpin>(
        &mut self,
        s: &mut S,
        sleep: std::pin::Pin<&mut tokio::time::Sleep>,
        deadline: std::time::Instant,
        limit: usize,
    ) -> bool {
        matches!(within(sleep, deadline, self.fill(s, limit)).await, Some(Ok(n)) if n > 0)
    }
}

/// Serve requests on one connection. `tls`: the stream is TLS (close with close_notify).
// The server's hot path: one connection's loop (read, parse, answer, keep or close)
// as one state machine over one buffer.
#[allow(clippy::too_many_lines)]
async fn serve<S: AsyncRead + AsyncWrite + Unpin + SocketOptions + Send + 'static>(
    mut s: S,
    shared: &Arc<Shared>,
    over_limit: bool,
    tls: bool,
) {
    let cfg = &shared.cfg;
    // Small to start (like nginx's 1 KiB header buffer); grows up to the head limit.
    let mut buf = Buf {
        data: vec![0; 1000],
        start: 0,
        end: 0,
    };
    let mut out: Vec<u8> = Vec::with_capacity(512);
    let mut served: u64 = 0;
    // One timer for the connection, re-armed lazily (see `timer::within`).
    let mut sleep = std::pin::pin!(tokio::time::sleep(cfg.idle_timeout));
    loop {
        // Wait for a request: the idle timeout runs until its first byte, the header
        // timeout from then until the head is complete.
        let mut head_deadline: Option<std::time::Instant> = None;
        let info = loop {
            if buf.end > buf.start {
                match parse_request(buf.pending(), cfg.max_header_bytes) {
                    ParseOutcome::Complete(i) => break i,
                    ParseOutcome::Partial => {}
                    ParseOutcome::Reject(_)
                        if served == 0 && !tls && buf.pending().starts_with(PREFACE_START) =>
                    {
                        // HTTP/2 with prior knowledge (h2c). Its frames go out in
                        // several writes: no Nagle delay between them.
                        s.set_nodelay();
                        let read = buf.pending().to_vec();
                        let io = super::h2::Rewind::new(read, s);
                        return Box::pin(super::h2::serve(io, shared.clone(), false)).await;
                    }
                    ParseOutcome::Reject(code) => {
                        let _ = respond_error(&mut s, &mut out, code).await;
                        return;
                    }
                }
                head_deadline.get_or_insert_with(|| std::time::Instant::now() + cfg.header_timeout);
            }
            let deadline =
                head_deadline.unwrap_or_else(|| std::time::Instant::now() + cfg.idle_timeout);
            match within(
                sleep.as_mut(),
                deadline,
                buf.fill(&mut s, cfg.max_header_bytes),
            )
            .await
            {
                None if buf.end == buf.start => return, // idle timeout: close silently
                None => {
                    let _ = respond_error(&mut s, &mut out, 408).await;
                    return;
                }
                Some(Err(_)) | Some(Ok(0)) => return,
                Some(Ok(_)) => {}
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
        // Discard the request body; it must arrive within the header timeout.
        let body_deadline = std::time::Instant::now() + cfg.header_timeout;
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
                    if !buf
                        .fill_by(&mut s, sleep.as_mut(), body_deadline, cfg.max_header_bytes)
                        .await
                    {
                        return;
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
                    if !buf
                        .fill_by(&mut s, sleep.as_mut(), body_deadline, cfg.max_header_bytes)
                        .await
                    {
                        return;
                    }
                }
            }
        }
        served += 1;
        shared.stats.requests.fetch_add(1, Ordering::Relaxed);

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
        let conn = if cfg.http10 || info.minor == 0 {
            // A 1.0 exchange is persistent only with an explicit keep-alive.
            match (keep, cfg.http10) {
                (true, _) => ConnHeader::KeepAlive,
                (false, true) => ConnHeader::None,
                (false, false) => ConnHeader::Close,
            }
        } else if keep {
            ConnHeader::None
        } else {
            ConnHeader::Close
        };

        // Route and answer.
        let Answer {
            status,
            body_len,
            stats_body,
        } = answer(info.route, shared).await;
        let no_body = info.head || status == 204 || status == 304;
        let mut body_left = if no_body { 0 } else { body_len };
        let bytes: &[u8] = if info.route == Route::Default && !info.head {
            // The common case: built once at start (with the body when it is small).
            if body_left <= INLINE_BODY {
                body_left = 0;
            }
            let defaults = match shared.tls_default_responses.get() {
                Some(d) if tls => d,
                _ => &shared.default_responses,
            };
            &defaults[conn as usize]
        } else {
            out.clear();
            let json = stats_body.is_some();
            let alt_svc = shared.alt_svc(tls);
            write_head(&mut out, cfg, status, body_len, json, conn, alt_svc);
            if let Some(b) = &stats_body {
                if !no_body {
                    out.extend_from_slice(b);
                }
                body_left = 0;
            } else if body_left <= INLINE_BODY {
                out.extend_from_slice(&FILL[..body_left]);
                body_left = 0;
            }
            &out
        };
        if !keep {
            s.last_writes();
        }
        if s.write_all(bytes).await.is_err() {
            return;
        }
        if body_left > 0 {
            // More writes follow: do not let Nagle hold their small tails back.
            s.set_nodelay();
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
            if tls {
                let _ = timeout(cfg.header_timeout, s.shutdown()).await;
            }
            return;
        }
    }
}

/// What the connection loop asks of whatever stream it serves over: its socket's
/// options.
trait SocketOptions {
    /// Setting TCP_NODELAY.
    fn set_nodelay(&self);
    /// The writes that follow are the connection's last (`ServerStream::last_writes`).
    fn last_writes(&mut self);
}

impl SocketOptions for ServerStream {
    fn set_nodelay(&self) {
        let _ = ServerStream::set_nodelay(self, true);
    }

    fn last_writes(&mut self) {
        ServerStream::last_writes(self);
    }
}

impl SocketOptions for super::early::EarlyTls {
    fn set_nodelay(&self) {
        // Set at the start of the handshake.
    }

    fn last_writes(&mut self) {
        // A response in 0.5-RTT data is written before the client's Finished, which the
        // close then waits for: a held tail would wait that round trip with it.
        if !self.session().is_handshaking() {
            self.socket_mut().last_writes();
        }
    }
}

impl SocketOptions for tokio_rustls::server::TlsStream<ServerStream> {
    fn set_nodelay(&self) {
        // Set once at the handshake already.
    }

    fn last_writes(&mut self) {
        self.get_mut().0.last_writes();
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
