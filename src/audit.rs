//! `handshake audit`: stands where the server is and reports how a client uses its
//! connections: requests per connection, HTTP versions and `Connection` headers sent,
//! idle gaps, peak concurrency, and how each connection ended (the client closed it after
//! a complete response, reset it, left response bytes unread, the server side closed it,
//! or it was still open). Answers itself like the embedded server, or forwards to
//! `--upstream` over its own persistent connections.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::http1::{has_token, ChunkedDecoder};
use crate::net::{Origin, Stream};
use crate::server::conn::{reason, route_of, write_head, ConnHeader, Route, FILL};
use crate::server::ServerConfig;

/// How a connection ended, as far as the socket shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The client closed it (FIN) after complete responses.
    ClientClosed,
    /// The client reset it (RST) with no response outstanding.
    ClientReset,
    /// The client reset it right after a response with a body: it closed with response
    /// bytes unread (a kernel resets a socket closed with unread data).
    ClientClosedUnread,
    /// The client went away inside a request.
    ClientClosedMidRequest,
    /// The client went away while the response was being written.
    ClientClosedMidResponse,
    /// This side closed it (the client asked, or HTTP/1.0 without keep-alive).
    ServerClosed,
    /// The client sent something that is not HTTP.
    Garbage,
    /// The client started a request and stalled past the header timeout.
    Stalled,
    /// Idle past the idle timeout; closed by this side.
    IdleTimeout,
    /// A request head or body over the size limits: answered 431 or 413, closed.
    TooLarge,
    /// Over the connection limit: answered 503, closed.
    OverLimit,
    /// Still open when the audit ended.
    OpenAtEnd,
}

#[derive(Debug, Clone, Default)]
struct ConnLog {
    client: Option<IpAddr>,
    requests: u64,
    responses: u64,
    versions: BTreeMap<String, u64>,
    connection_headers: BTreeMap<String, u64>,
    gaps: GapStats,
    end: Option<Ending>,
    /// With `--tls`: whether the handshake resumed a session.
    tls_resumed: Option<bool>,
    /// Body bytes of the last response.
    last_body: u64,
    /// A response the client cut off: (body bytes written, body bytes in all).
    cut: Option<(u64, u64)>,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct GapStats {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    #[serde(skip)]
    sum_ms: f64,
}

impl GapStats {
    fn add(&mut self, ms: f64) {
        self.min_ms = if self.count == 0 {
            ms
        } else {
            self.min_ms.min(ms)
        };
        self.max_ms = self.max_ms.max(ms);
        self.count += 1;
        self.sum_ms += ms;
        self.mean_ms = self.sum_ms / self.count as f64;
    }

    fn merge(&mut self, o: &GapStats) {
        if o.count == 0 {
            return;
        }
        self.min_ms = if self.count == 0 {
            o.min_ms
        } else {
            self.min_ms.min(o.min_ms)
        };
        self.max_ms = self.max_ms.max(o.max_ms);
        self.count += o.count;
        self.sum_ms += o.sum_ms;
        self.mean_ms = self.sum_ms / self.count as f64;
    }
}

#[derive(Default)]
struct Log {
    conns: Vec<ConnLog>,
    open: u64,
    peak_open: u64,
}

type SharedLog = Arc<Mutex<Log>>;

fn with_log<R>(log: &SharedLog, f: impl FnOnce(&mut Log) -> R) -> R {
    let mut g = log.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g)
}

/// Where requests go: answered here, or forwarded.
#[derive(Clone)]
pub struct Upstream {
    pub origin: Origin,
    pub authority: String,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pool: Arc<Mutex<Vec<crate::engine::conn::Conn>>>,
}

impl Upstream {
    pub fn new(
        origin: Origin,
        authority: String,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Upstream {
        Upstream {
            origin,
            authority,
            tls,
            pool: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

pub struct AuditConfig {
    pub listen: SocketAddr,
    pub tls: bool,
    pub upstream: Option<Upstream>,
    /// Responses, timeouts and limits when answering here.
    pub server: ServerConfig,
}

/// A running audit: its URL, its CA (with `--tls`), and its log.
pub struct RunningAudit {
    pub url: String,
    pub ca_pem: String,
    log: SharedLog,
    thread: crate::runtime_thread::RuntimeThread,
}

impl RunningAudit {
    /// Client connections open now.
    pub fn open_connections(&self) -> u64 {
        with_log(&self.log, |g| g.open)
    }

    /// Stop and return the report (connections still open count as `open_at_end`).
    pub fn finish(mut self, command: Option<Vec<String>>, exit_status: Option<i32>) -> AuditReport {
        self.thread.stop();
        report(&self.url, &self.log, command, exit_status)
    }
}

pub fn start(cfg: AuditConfig) -> anyhow::Result<RunningAudit> {
    let certs = crate::server::tls::generate()?;
    let log: SharedLog = Arc::new(Mutex::new(Log::default()));
    let tls = cfg.tls;
    let acceptor = tls.then(|| tokio_rustls::TlsAcceptor::from(certs.server_config.clone()));
    let shared = Arc::new((cfg, log.clone()));
    let (addr, thread) = crate::runtime_thread::RuntimeThread::spawn(
        "handshake-audit",
        || {},
        move || async move {
            let l = TcpListener::bind(shared.0.listen)
                .await
                .with_context(|| format!("binding {}", shared.0.listen))?;
            let addr = l.local_addr()?;
            tokio::spawn(accept_loop(l, shared, acceptor));
            anyhow::Ok(addr)
        },
    )?;
    let url = format!("{}://{addr}/", if tls { "https" } else { "http" });
    Ok(RunningAudit {
        url,
        ca_pem: certs.ca_pem,
        log,
        thread,
    })
}

async fn accept_loop(
    l: TcpListener,
    shared: Arc<(AuditConfig, SharedLog)>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    loop {
        let Ok((sock, peer)) = l.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = sock.set_nodelay(true);
        let (idx, over_limit) = with_log(&shared.1, |g| {
            g.open += 1;
            g.peak_open = g.peak_open.max(g.open);
            g.conns.push(ConnLog {
                client: Some(peer.ip()),
                ..ConnLog::default()
            });
            (g.conns.len() - 1, g.open > shared.0.server.max_connections)
        });
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let end = match tls {
                None => serve(sock, &shared, idx, over_limit).await,
                Some(acc) => {
                    match tokio::time::timeout(shared.0.server.header_timeout, acc.accept(sock))
                        .await
                    {
                        Ok(Ok(s)) => {
                            let resumed = s.get_ref().1.handshake_kind()
                                == Some(rustls::HandshakeKind::Resumed);
                            with_log(&shared.1, |g| g.conns[idx].tls_resumed = Some(resumed));
                            serve(s, &shared, idx, over_limit).await
                        }
                        Ok(Err(_)) => Ending::Garbage,
                        Err(_) => Ending::Stalled,
                    }
                }
            };
            with_log(&shared.1, |g| {
                g.open -= 1;
                g.conns[idx].end = Some(end);
            });
        });
    }
}

fn is_reset(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
    )
}

/// Answer `status` with an empty body and close: the client broke a limit.
async fn reject<S: AsyncWrite + Unpin>(s: &mut S, status: u16) {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        reason(status)
    );
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.shutdown().await;
}

/// Serve one client connection; returns how it ended. Over the connection limit, the
/// first request is answered 503.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    shared: &(AuditConfig, SharedLog),
    idx: usize,
    over_limit: bool,
) -> Ending {
    let (cfg, log) = (&shared.0, &shared.1);
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = vec![0u8; 16 * 1024];
    let mut last_response_end: Option<Instant> = None;
    loop {
        // The request head.
        let mut head_started: Option<Instant> = None;
        let (head_len, info) = loop {
            if !buf.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut req = httparse::Request::new(&mut headers);
                match req.parse(&buf) {
                    Ok(httparse::Status::Complete(n)) if n <= cfg.server.max_header_bytes => {
                        break (n, RequestLine::from(&req))
                    }
                    Ok(httparse::Status::Partial) if buf.len() <= cfg.server.max_header_bytes => {}
                    Ok(_) | Err(httparse::Error::TooManyHeaders) => {
                        reject(&mut s, 431).await;
                        return Ending::TooLarge;
                    }
                    Err(_) => {
                        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
                        return Ending::Garbage;
                    }
                }
            }
            let limit = match head_started {
                None => cfg.server.idle_timeout,
                Some(t) => cfg.server.header_timeout.saturating_sub(t.elapsed()),
            };
            match tokio::time::timeout(limit, s.read(&mut chunk)).await {
                Err(_) if buf.is_empty() => return Ending::IdleTimeout,
                Err(_) => {
                    reject(&mut s, 408).await;
                    return Ending::Stalled;
                }
                Ok(Ok(0)) if buf.is_empty() => return Ending::ClientClosed,
                Ok(Ok(0)) => return Ending::ClientClosedMidRequest,
                Ok(Err(e)) if buf.is_empty() && is_reset(&e) => {
                    let unread = with_log(log, |g| g.conns[idx].last_body > 0);
                    return if unread {
                        Ending::ClientClosedUnread
                    } else {
                        Ending::ClientReset
                    };
                }
                Ok(Err(_)) => return Ending::ClientClosedMidRequest,
                Ok(Ok(n)) => {
                    head_started.get_or_insert_with(Instant::now);
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
        };
        let gap = last_response_end
            .map(|t| head_started.map_or(t.elapsed(), |h| h.saturating_duration_since(t)));
        with_log(log, |g| {
            let c = &mut g.conns[idx];
            c.requests += 1;
            *c.versions
                .entry(format!("HTTP/1.{}", info.minor))
                .or_default() += 1;
            *c.connection_headers
                .entry(info.connection.clone())
                .or_default() += 1;
            if let Some(gap) = gap {
                c.gaps.add(gap.as_secs_f64() * 1000.0);
            }
        });
        buf.drain(..head_len);
        if over_limit {
            reject(&mut s, 503).await;
            return Ending::OverLimit;
        }
        // The request body.
        let body = match read_body(&mut s, &mut buf, &mut chunk, &info, &cfg.server).await {
            Ok(b) => b,
            Err(end) => {
                match end {
                    Ending::TooLarge => reject(&mut s, 413).await,
                    Ending::Stalled => reject(&mut s, 408).await,
                    _ => {}
                }
                return end;
            }
        };
        let keep = cfg.server.keepalive
            && if info.minor >= 1 {
                !info.close
            } else {
                info.keep_alive && !info.close
            };
        let conn = match (keep, info.minor) {
            (true, 0) => ConnHeader::KeepAlive,
            (true, _) => ConnHeader::None,
            (false, _) => ConnHeader::Close,
        };
        let response = match &cfg.upstream {
            None => local_response(&info, &cfg.server, conn).await,
            Some(up) => match forward(up, &info, &body, conn).await {
                Ok(r) => r,
                Err(e) => {
                    let msg = format!("handshake audit: upstream failed: {e:#}\n");
                    let mut out = Vec::new();
                    let _ = write!(out, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}", msg.len());
                    (out, 0, msg.len() as u64)
                }
            },
        };
        let (bytes, extra_fill, body_len) = response;
        with_log(log, |g| g.conns[idx].last_body = body_len);
        let cut = |written: u64| with_log(log, |g| g.conns[idx].cut = Some((written, body_len)));
        if s.write_all(&bytes).await.is_err() {
            cut(0);
            return Ending::ClientClosedMidResponse;
        }
        // The body bytes written with the head; the rest comes from FILL.
        let mut written = body_len - extra_fill;
        let mut left = extra_fill;
        while left > 0 {
            let n = left.min(FILL.len() as u64) as usize;
            if s.write_all(&FILL[..n]).await.is_err() {
                cut(written);
                return Ending::ClientClosedMidResponse;
            }
            written += n as u64;
            left -= n as u64;
        }
        if s.flush().await.is_err() {
            cut(written);
            return Ending::ClientClosedMidResponse;
        }
        with_log(log, |g| g.conns[idx].responses += 1);
        last_response_end = Some(Instant::now());
        if !keep {
            let _ = s.shutdown().await;
            return Ending::ServerClosed;
        }
    }
}

/// The parts of a request the audit needs.
#[derive(Debug, Clone)]
struct RequestLine {
    method: String,
    target: String,
    minor: u8,
    /// "close", "keep-alive", or "none".
    connection: String,
    close: bool,
    keep_alive: bool,
    content_length: Option<u64>,
    chunked: bool,
    /// End-to-end headers, to forward.
    headers: Vec<(String, Vec<u8>)>,
}

/// Hop-by-hop headers (RFC 9110 7.6.1), never forwarded.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

impl RequestLine {
    fn from(req: &httparse::Request<'_, '_>) -> RequestLine {
        let mut r = RequestLine {
            method: req.method.unwrap_or("GET").to_string(),
            target: req.path.unwrap_or("/").to_string(),
            minor: req.version.unwrap_or(1),
            connection: "none".into(),
            close: false,
            keep_alive: false,
            content_length: None,
            chunked: false,
            headers: Vec::new(),
        };
        let mut listed: Vec<String> = Vec::new();
        for h in req.headers.iter() {
            let name = h.name.to_ascii_lowercase();
            match name.as_str() {
                "connection" => {
                    r.close |= has_token(h.value, "close");
                    r.keep_alive |= has_token(h.value, "keep-alive");
                    listed.extend(
                        String::from_utf8_lossy(h.value)
                            .split(',')
                            .map(|t| t.trim().to_ascii_lowercase()),
                    );
                }
                "content-length" => {
                    r.content_length = std::str::from_utf8(h.value)
                        .ok()
                        .and_then(|v| v.trim().parse().ok())
                }
                "transfer-encoding" => r.chunked = has_token(h.value, "chunked"),
                _ => {}
            }
            if !HOP_BY_HOP.contains(&name.as_str()) && name != "host" && name != "content-length" {
                r.headers.push((h.name.to_string(), h.value.to_vec()));
            }
        }
        r.headers
            .retain(|(k, _)| !listed.contains(&k.to_ascii_lowercase()));
        r.connection = match (r.close, r.keep_alive) {
            (true, _) => "close".into(),
            (false, true) => "keep-alive".into(),
            _ => "none".into(),
        };
        r
    }
}

/// Read (and keep, for forwarding) the request body.
async fn read_body<S: AsyncRead + Unpin>(
    s: &mut S,
    buf: &mut Vec<u8>,
    chunk: &mut [u8],
    info: &RequestLine,
    cfg: &ServerConfig,
) -> Result<Vec<u8>, Ending> {
    let deadline = Instant::now() + cfg.header_timeout;
    if info.chunked {
        let mut dec = ChunkedDecoder::new();
        let mut data = Vec::new();
        loop {
            let fed = dec.feed_data(buf, &mut data).map_err(|_| Ending::Garbage)?;
            buf.drain(..fed.consumed);
            if fed.done {
                return Ok(data);
            }
            if data.len() as u64 > cfg.max_body_bytes {
                return Err(Ending::TooLarge);
            }
            read_more(s, buf, chunk, deadline).await?;
        }
    }
    let n = info.content_length.unwrap_or(0);
    if n > cfg.max_body_bytes {
        return Err(Ending::TooLarge);
    }
    while (buf.len() as u64) < n {
        read_more(s, buf, chunk, deadline).await?;
    }
    Ok(buf.drain(..n as usize).collect())
}

/// Read more request bytes before `deadline`.
async fn read_more<S: AsyncRead + Unpin>(
    s: &mut S,
    buf: &mut Vec<u8>,
    chunk: &mut [u8],
    deadline: Instant,
) -> Result<(), Ending> {
    let left = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(left, s.read(chunk)).await {
        Ok(Ok(n)) if n > 0 => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        }
        Err(_) => Err(Ending::Stalled),
        _ => Err(Ending::ClientClosedMidRequest),
    }
}

/// A response from the embedded routes: (bytes to write, FILL bytes to add, body length).
async fn local_response(
    info: &RequestLine,
    cfg: &ServerConfig,
    conn: ConnHeader,
) -> (Vec<u8>, u64, u64) {
    let mut status = 200;
    let mut body_len = cfg.body_size;
    match route_of(&info.target) {
        Route::Bytes(n) => body_len = n,
        Route::Delay(d) => tokio::time::sleep(d).await,
        Route::Status(c) => status = c,
        Route::Bad => {
            status = 400;
            body_len = 0;
        }
        Route::Default | Route::Stats => {}
    }
    if !cfg.delay.is_zero() {
        tokio::time::sleep(cfg.delay).await;
    }
    let no_body = info.method == "HEAD" || status == 204 || status == 304;
    let mut out = Vec::with_capacity(256);
    write_head(&mut out, cfg, status, body_len, false, conn);
    let body = if no_body { 0 } else { body_len as u64 };
    (out, body, body)
}

/// Forward to the upstream over a pooled connection; returns the response to write.
async fn forward(
    up: &Upstream,
    info: &RequestLine,
    body: &[u8],
    conn: ConnHeader,
) -> anyhow::Result<(Vec<u8>, u64, u64)> {
    let mut req = Vec::with_capacity(512 + body.len());
    let _ = write!(
        req,
        "{} {} HTTP/1.1\r\nHost: {}\r\n",
        info.method, info.target, up.authority
    );
    for (k, v) in &info.headers {
        req.extend_from_slice(k.as_bytes());
        req.extend_from_slice(b": ");
        req.extend_from_slice(v);
        req.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() || matches!(info.method.as_str(), "POST" | "PUT" | "PATCH") {
        let _ = write!(req, "Content-Length: {}\r\n", body.len());
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body);
    // A pooled connection may have been closed while idle: retry once on a new one.
    for attempt in 0..2 {
        let pooled = if attempt == 0 {
            up.pool.lock().unwrap_or_else(|p| p.into_inner()).pop()
        } else {
            None
        };
        let fresh = pooled.is_none();
        let mut c = match pooled {
            Some(c) => c,
            None => {
                let o = crate::probe::open(
                    &up.origin,
                    up.tls.as_ref(),
                    Duration::from_secs(30),
                    &Default::default(),
                )
                .await
                .map_err(|e| anyhow::anyhow!("connecting to the upstream: {e}"))?;
                o.conn
            }
        };
        if c.send(&req).await.is_err() && !fresh {
            continue;
        }
        match read_upstream(&mut c.stream, info.method == "HEAD").await {
            Ok((head, body, persistent)) => {
                if persistent {
                    up.pool.lock().unwrap_or_else(|p| p.into_inner()).push(c);
                }
                let mut out = rewrite_head(&head, body.len(), conn)?;
                let n = body.len() as u64;
                out.extend_from_slice(&body);
                return Ok((out, 0, n));
            }
            Err(_) if !fresh => continue,
            Err(e) => return Err(e),
        }
    }
    anyhow::bail!("the upstream closed the connection")
}

/// Read one upstream response: (head bytes, body data, connection reusable).
async fn read_upstream(
    s: &mut Stream,
    head_request: bool,
) -> anyhow::Result<(Vec<u8>, Vec<u8>, bool)> {
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut chunk = vec![0u8; 16 * 1024];
    let head = loop {
        if let Some(h) =
            crate::http1::parse_head(&buf, head_request).map_err(|e| anyhow::anyhow!("{e:?}"))?
        {
            if h.is_informational() {
                buf.drain(..h.head_len);
                continue;
            }
            break h;
        }
        let n = s.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "the upstream closed before a response");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head_bytes: Vec<u8> = buf.drain(..head.head_len).collect();
    let body = match head.framing {
        crate::http1::Framing::None => Vec::new(),
        crate::http1::Framing::Length(n) => {
            while (buf.len() as u64) < n {
                let r = s.read(&mut chunk).await?;
                anyhow::ensure!(r > 0, "the upstream closed inside the body");
                buf.extend_from_slice(&chunk[..r]);
            }
            buf.drain(..n as usize).collect()
        }
        crate::http1::Framing::Chunked => {
            let mut dec = ChunkedDecoder::new();
            let mut data = Vec::new();
            loop {
                let fed = dec
                    .feed_data(&buf, &mut data)
                    .map_err(|e| anyhow::anyhow!("{e:?}"))?;
                buf.drain(..fed.consumed);
                if fed.done {
                    break data;
                }
                let r = s.read(&mut chunk).await?;
                anyhow::ensure!(r > 0, "the upstream closed inside the body");
                buf.extend_from_slice(&chunk[..r]);
            }
        }
        crate::http1::Framing::UntilClose => {
            loop {
                let r = s.read(&mut chunk).await?;
                if r == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..r]);
            }
            std::mem::take(&mut buf)
        }
    };
    let persistent =
        head.persistent && head.framing != crate::http1::Framing::UntilClose && buf.is_empty();
    Ok((head_bytes, body, persistent))
}

/// The upstream's head for the client: hop-by-hop headers dropped, our framing and
/// `Connection` added.
fn rewrite_head(head: &[u8], body_len: usize, conn: ConnHeader) -> anyhow::Result<Vec<u8>> {
    let mut headers = [httparse::EMPTY_HEADER; crate::http1::MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    resp.parse(head)?;
    let status = resp.code.unwrap_or(502);
    let mut out = Vec::with_capacity(head.len() + 64);
    let _ = write!(
        out,
        "HTTP/1.1 {status} {}\r\n",
        resp.reason.unwrap_or(reason(status))
    );
    for h in resp.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&name.as_str()) || name == "content-length" {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    if status != 204 && status != 304 {
        let _ = write!(out, "Content-Length: {body_len}\r\n");
    }
    match conn {
        ConnHeader::None => {}
        ConnHeader::Close => out.extend_from_slice(b"Connection: close\r\n"),
        ConnHeader::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
    }
    out.extend_from_slice(b"\r\n");
    Ok(out)
}

/// Figures for one client address, or for all.
#[derive(Debug, Clone, Serialize)]
pub struct ClientSummary {
    pub client: String,
    pub connections: u64,
    pub requests: u64,
    pub responses: u64,
    pub requests_per_connection: RpcStats,
    /// Requests that did not open their connection / all requests.
    pub reuse_ratio: f64,
    pub http_versions: BTreeMap<String, u64>,
    pub connection_headers: BTreeMap<String, u64>,
    pub idle_gaps: GapStats,
    pub endings: BTreeMap<Ending, u64>,
    /// With `--tls`: handshakes that were full and resumed.
    pub tls_handshakes: TlsCounts,
    /// Responses the client cut off: how many, and body bytes written of all of them.
    pub cut_responses: CutResponses,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CutResponses {
    pub count: u64,
    pub body_bytes_written: u64,
    pub body_bytes_total: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct TlsCounts {
    pub full: u64,
    pub resumed: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct RpcStats {
    pub min: u64,
    pub mean: f64,
    pub max: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    pub schema_version: u32,
    pub tool: &'static str,
    pub version: &'static str,
    pub url: String,
    pub command: Option<Vec<String>>,
    pub exit_status: Option<i32>,
    pub peak_concurrent_connections: u64,
    pub total: ClientSummary,
    pub clients: Vec<ClientSummary>,
    pub verdict: Vec<String>,
}

fn summarize(name: String, conns: &[&ConnLog]) -> ClientSummary {
    let mut s = ClientSummary {
        client: name,
        connections: conns.len() as u64,
        requests: 0,
        responses: 0,
        requests_per_connection: RpcStats {
            min: 0,
            mean: 0.0,
            max: 0,
        },
        reuse_ratio: 0.0,
        http_versions: BTreeMap::new(),
        connection_headers: BTreeMap::new(),
        idle_gaps: GapStats::default(),
        endings: BTreeMap::new(),
        tls_handshakes: TlsCounts::default(),
        cut_responses: CutResponses::default(),
    };
    let mut with_requests = 0u64;
    for c in conns {
        s.requests += c.requests;
        s.responses += c.responses;
        if c.requests > 0 {
            with_requests += 1;
        }
        for (k, v) in &c.versions {
            *s.http_versions.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &c.connection_headers {
            *s.connection_headers.entry(k.clone()).or_default() += v;
        }
        s.idle_gaps.merge(&c.gaps);
        if let Some((written, total)) = c.cut {
            s.cut_responses.count += 1;
            s.cut_responses.body_bytes_written += written;
            s.cut_responses.body_bytes_total += total;
        }
        match c.tls_resumed {
            Some(true) => s.tls_handshakes.resumed += 1,
            Some(false) => s.tls_handshakes.full += 1,
            None => {}
        }
        *s.endings
            .entry(c.end.unwrap_or(Ending::OpenAtEnd))
            .or_default() += 1;
    }
    let rpc: Vec<u64> = conns.iter().map(|c| c.requests).collect();
    s.requests_per_connection = RpcStats {
        min: rpc.iter().copied().min().unwrap_or(0),
        mean: if rpc.is_empty() {
            0.0
        } else {
            s.requests as f64 / rpc.len() as f64
        },
        max: rpc.iter().copied().max().unwrap_or(0),
    };
    s.reuse_ratio = if s.requests > 0 {
        (s.requests - with_requests) as f64 / s.requests as f64
    } else {
        0.0
    };
    s
}

fn report(
    url: &str,
    log: &SharedLog,
    command: Option<Vec<String>>,
    exit_status: Option<i32>,
) -> AuditReport {
    let (conns, peak) = with_log(log, |g| (g.conns.clone(), g.peak_open));
    let all: Vec<&ConnLog> = conns.iter().collect();
    let total = summarize("all".into(), &all);
    let mut by: BTreeMap<String, Vec<&ConnLog>> = BTreeMap::new();
    for c in &conns {
        by.entry(c.client.map(|a| a.to_string()).unwrap_or_default())
            .or_default()
            .push(c);
    }
    let clients = by.into_iter().map(|(k, v)| summarize(k, &v)).collect();
    let verdict = verdict(&total);
    AuditReport {
        schema_version: crate::report::SCHEMA_VERSION,
        tool: "handshake",
        version: env!("CARGO_PKG_VERSION"),
        url: url.to_string(),
        command,
        exit_status,
        peak_concurrent_connections: peak,
        total,
        clients,
        verdict,
    }
}

fn count<K: Ord>(m: &BTreeMap<K, u64>, k: &K) -> u64 {
    m.get(k).copied().unwrap_or(0)
}

/// Plain sentences: what the client does with connections, the likely cause, the fix.
pub fn verdict(t: &ClientSummary) -> Vec<String> {
    let mut v = Vec::new();
    let plural = |n: u64, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    if t.requests == 0 {
        v.push(format!(
            "No request was seen ({}).",
            plural(t.connections, "connection")
        ));
    } else if t.connections >= t.requests && t.requests > 1 {
        v.push(format!(
            "{} over {}: no reuse.",
            plural(t.requests, "request"),
            plural(t.connections, "connection")
        ));
        let close = count(&t.connection_headers, &"close".to_string());
        let v10 = count(&t.http_versions, &"HTTP/1.0".to_string());
        let ka = count(&t.connection_headers, &"keep-alive".to_string());
        let unread = count(&t.endings, &Ending::ClientClosedUnread);
        if close == t.requests {
            v.push("The client sent `Connection: close` on every request.".into());
        } else if v10 == t.requests && ka == 0 {
            v.push("The client sent HTTP/1.0 requests without `Connection: keep-alive`.".into());
        } else if unread * 2 >= t.connections {
            // Said below.
        } else if count(&t.endings, &Ending::ClientClosed) * 2 >= t.connections {
            v.push(
                "The client closed each connection itself after one response, without asking the server to (no `Connection: close`): it does not pool connections (for example Node's `agent: false`, or a new client per request). Reuse one client with keep-alive.".into(),
            );
        }
    } else if t.connections < t.requests {
        v.push(format!(
            "{} over {}: connections are reused ({:.1} requests per connection).",
            plural(t.requests, "request"),
            plural(t.connections, "connection"),
            t.requests_per_connection.mean
        ));
    }
    let tls = t.tls_handshakes;
    if tls.full + tls.resumed > 1 {
        v.push(if tls.resumed == 0 {
            format!(
                "TLS: all {} handshakes were full: the client does not resume sessions, so each new connection pays the full handshake.",
                tls.full
            )
        } else {
            format!("TLS: {} of {} handshakes resumed a session.", tls.resumed, tls.full + tls.resumed)
        });
    }
    let unread = count(&t.endings, &Ending::ClientClosedUnread);
    if unread > 0 {
        v.push(format!(
            "The client reset {} with unread response bytes left: it does not read response bodies to the end, which prevents reuse (in Go: read the body to EOF and close it).",
            plural(unread, "connection")
        ));
    }
    for (e, what) in [
        (Ending::Garbage, "sent something that is not HTTP"),
        (
            Ending::Stalled,
            "stalled inside a request past the header timeout",
        ),
        (
            Ending::ClientClosedMidRequest,
            "disconnected in the middle of a request",
        ),
        (
            Ending::ClientClosedMidResponse,
            "disconnected while a response was being written",
        ),
        (Ending::ClientReset, "reset the connection"),
        (
            Ending::TooLarge,
            "sent a request over the size limits (answered 431 or 413)",
        ),
        (
            Ending::OverLimit,
            "came over the connection limit (answered 503)",
        ),
    ] {
        let n = count(&t.endings, &e);
        if n > 0 {
            let detail =
                if e == Ending::ClientClosedMidResponse && t.cut_responses.body_bytes_total > 0 {
                    format!(
                        " ({} of {} body bytes had been written)",
                        t.cut_responses.body_bytes_written, t.cut_responses.body_bytes_total
                    )
                } else {
                    String::new()
                };
            v.push(format!(
                "On {} the client {what}{detail}.",
                plural(n, "connection")
            ));
        }
    }
    if t.responses < t.requests {
        v.push(format!(
            "{} of {} requests got no complete response.",
            t.requests - t.responses,
            t.requests
        ));
    }
    v
}

pub fn render(r: &AuditReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "audit {}", r.url);
    if let Some(c) = &r.command {
        let _ = writeln!(
            out,
            "  command: {} (exit status {})",
            c.join(" "),
            r.exit_status.map_or("-".into(), |s| s.to_string())
        );
    }
    let _ = writeln!(
        out,
        "  peak concurrent connections: {}",
        r.peak_concurrent_connections
    );
    for s in std::iter::once(&r.total).chain(r.clients.iter().filter(|_| r.clients.len() > 1)) {
        let _ = writeln!(
            out,
            "\n{}",
            if s.client == "all" {
                "All clients".to_string()
            } else {
                format!("Client {}", s.client)
            }
        );
        let _ = writeln!(out, "  connections           {}", s.connections);
        let _ = writeln!(
            out,
            "  requests              {} ({} answered)",
            s.requests, s.responses
        );
        let _ = writeln!(
            out,
            "  requests/connection   min {}  mean {:.1}  max {}   (reuse ratio {:.1} %)",
            s.requests_per_connection.min,
            s.requests_per_connection.mean,
            s.requests_per_connection.max,
            s.reuse_ratio * 100.0
        );
        let fmt_map = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(out, "  HTTP versions         {}", fmt_map(&s.http_versions));
        let _ = writeln!(
            out,
            "  Connection headers    {}",
            fmt_map(&s.connection_headers)
        );
        if s.idle_gaps.count > 0 {
            let g = &s.idle_gaps;
            let _ = writeln!(
                out,
                "  idle gaps (ms)        min {:.2}  mean {:.2}  max {:.2}  ({})",
                g.min_ms, g.mean_ms, g.max_ms, g.count
            );
        }
        let endings: Vec<String> = s
            .endings
            .iter()
            .map(|(k, v)| {
                format!(
                    "{} {v}",
                    serde_json::to_value(k)
                        .ok()
                        .and_then(|x| x.as_str().map(String::from))
                        .unwrap_or_default()
                )
            })
            .collect();
        let _ = writeln!(out, "  how connections ended {}", endings.join(", "));
        if s.tls_handshakes.full + s.tls_handshakes.resumed > 0 {
            let _ = writeln!(
                out,
                "  TLS handshakes        full {}, resumed {}",
                s.tls_handshakes.full, s.tls_handshakes.resumed
            );
        }
    }
    let _ = writeln!(out, "\nVerdict");
    for v in &r.verdict {
        let _ = writeln!(out, "  {v}");
    }
    out
}
