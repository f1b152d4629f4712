//! The audit's server: accepts clients, reads their requests, answers them here or
//! through the upstream, and logs each connection.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use super::answer::{is_reset, local_response, own_answer, AuditConfig, RequestLine};
use super::log::{with_log, ConnLog, Ending, Log, SharedLog};
use super::proxy::forward;
use super::report::{report, AuditReport};
use crate::proto::h1::ChunkedDecoder;
use crate::server::routes::{ConnHeader, FILL};
use crate::server::ServerConfig;

/// A running audit: its URL, its CA (with `--tls`), and its log.
pub(crate) struct RunningAudit {
    pub url: String,
    pub ca_pem: String,
    pub(super) log: SharedLog,
    pub(super) thread: crate::runtime_thread::RuntimeThread,
}

impl RunningAudit {
    /// Client connections open now.
    pub(crate) fn open_connections(&self) -> u64 {
        with_log(&self.log, |g| g.open)
    }

    /// Stop and return the report (connections still open count as `open_at_end`).
    pub(crate) fn finish(
        mut self,
        command: Option<Vec<String>>,
        exit_status: Option<i32>,
    ) -> AuditReport {
        self.thread.stop();
        report(&self.url, &self.log, command, exit_status)
    }
}

pub(crate) fn start(cfg: AuditConfig) -> anyhow::Result<RunningAudit> {
    let bound = Some(cfg.listen.ip()).filter(|ip| !ip.is_unspecified());
    let certs = crate::server::tls::generate(&crate::server::tls::Offer {
        h2: true,
        also: bound,
        client_certs: cfg.client_certs.clone(),
        ..Default::default()
    })?;
    let log: SharedLog = Arc::new(Mutex::new(Log::default()));
    with_log(&log, |g| {
        g.timeline.begin(std::time::Instant::now());
        g.proxy_mode = cfg.proxy.is_some();
    });
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

/// The longest a new connection waits for the name of the program that opened it
/// before it is served.
const NAMING_WAIT: Duration = Duration::from_millis(100);

pub(super) async fn accept_loop(
    l: TcpListener,
    shared: Arc<(AuditConfig, SharedLog)>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    // Which program opened each connection: looked up beside the serving (it reads
    // /proc), while the client's socket is surely open.
    let programs = Arc::new(Mutex::new(crate::watch::Programs::new().ok()));
    // Lookups under way: a connection waits for its name only when none is (a burst of
    // new connections is named beside its serving, never queued in front of it).
    let naming_now = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    loop {
        let Ok((sock, peer)) = l.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = sock.set_nodelay(true);
        let name_it = (programs.clone(), shared.1.clone(), sock.local_addr());
        let (idx, over_limit) = with_log(&shared.1, |g| {
            g.open += 1;
            g.peak_open = g.peak_open.max(g.open);
            g.timeline.connection_opened();
            g.conns.push(ConnLog {
                client: Some(peer.ip()),
                ..ConnLog::default()
            });
            (g.conns.len() - 1, g.open > shared.0.server.max_connections)
        });
        let naming = match name_it {
            (programs, log, Ok(local)) => {
                use std::sync::atomic::Ordering::SeqCst;
                let alone = naming_now.fetch_add(1, SeqCst) == 0;
                let now = naming_now.clone();
                let lookup = tokio::task::spawn_blocking(move || {
                    let mut g = programs.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(name) = g.as_mut().and_then(|n| n.name(peer, local)) {
                        with_log(&log, |l| l.conns[idx].program = Some(name));
                    }
                    now.fetch_sub(1, SeqCst);
                });
                alone.then_some(lookup)
            }
            _ => None,
        };
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            // Named before it is served, so that a client that sends one request and
            // closes at once still has its socket open (the lookup reads /proc, on a
            // thread of the blocking pool: other connections go on meanwhile). Waited
            // for NAMING_WAIT at most, and only when no other lookup is under way: a
            // slow lookup (a busy machine, many processes) or a burst goes on beside
            // the serving rather than delay what the audit measures.
            if let Some(n) = naming {
                let _ = tokio::time::timeout(NAMING_WAIT, n).await;
            }
            let end = match tls {
                None => match first_bytes(&sock, shared.0.server.idle_timeout).await {
                    First::Idle => Ending::IdleTimeout,
                    First::H2 => super::h2::serve(sock, shared.clone(), idx).await,
                    First::Http1 => serve(sock, &shared, idx, over_limit).await,
                },
                Some(acc) => {
                    match tokio::time::timeout(shared.0.server.header_timeout, acc.accept(sock))
                        .await
                    {
                        Ok(Ok(s)) => {
                            let resumed = s.get_ref().1.handshake_kind()
                                == Some(rustls::HandshakeKind::Resumed);
                            let cert = shared
                                .0
                                .client_certs
                                .as_ref()
                                .map(|_| super::mtls::seen(s.get_ref().1, resumed));
                            with_log(&shared.1, |g| {
                                g.conns[idx].tls_resumed = Some(resumed);
                                g.conns[idx].client_cert = cert;
                                g.timeline.tls_handshake(if resumed {
                                    crate::record::HandshakeKind::Resumed
                                } else {
                                    crate::record::HandshakeKind::Full
                                });
                            });
                            if s.get_ref().1.alpn_protocol() == Some(b"h2".as_slice()) {
                                super::h2::serve(s, shared.clone(), idx).await
                            } else {
                                serve(s, &shared, idx, over_limit).await
                            }
                        }
                        Ok(Err(e)) => match super::mtls::refused(&e) {
                            Some(seen) => {
                                with_log(&shared.1, |g| g.conns[idx].client_cert = Some(seen));
                                Ending::CertificateRefused
                            }
                            None => super::mtls::handshake_failed(&e),
                        },
                        Err(_) => Ending::Stalled,
                    }
                }
            };
            with_log(&shared.1, |g| {
                g.open -= 1;
                g.conns[idx].end = Some(end);
                g.timeline.connection_ended();
            });
        });
    }
}

/// What a plain connection starts with.
enum First {
    /// The HTTP/2 prior-knowledge preface.
    H2,
    Http1,
    /// Nothing within the idle timeout.
    Idle,
}

/// Look at (without taking) the first bytes of a plain connection.
async fn first_bytes(sock: &tokio::net::TcpStream, idle: Duration) -> First {
    use crate::proto::h2::PREFACE_START;
    let deadline = Instant::now() + idle;
    let mut b = [0u8; 16];
    loop {
        let n = match tokio::time::timeout_at(deadline.into(), sock.peek(&mut b)).await {
            Err(_) => return First::Idle,
            Ok(Ok(n)) if n > 0 => n,
            // EOF or an error: the HTTP/1 reader sees it too and says how it ended.
            Ok(_) => return First::Http1,
        };
        if !PREFACE_START.starts_with(&b[..n]) {
            return First::Http1;
        }
        if n >= PREFACE_START.len() {
            return First::H2;
        }
        // The start of the preface and no more yet: wait for the rest.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Answer `status`, saying `why` (the audit's own answer), and close: the client broke a
/// limit.
pub(super) async fn reject<S: AsyncWrite + Unpin>(
    s: &mut S,
    (status, why): (u16, &str),
    log: &SharedLog,
    idx: usize,
) {
    let (bytes, _, _) = own_answer(log, idx, status, why);
    let _ = s.write_all(&bytes).await;
    let _ = s.shutdown().await;
}

/// Serve one client connection; returns how it ended. Over the connection limit, the
/// first request is answered 503.
pub(super) async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
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
        let (head_len, info, head_started) =
            match read_head(&mut s, &mut buf, &mut chunk, cfg, log, idx).await {
                Ok(h) => h,
                Err(end) => return end,
            };
        buf.drain(..head_len);
        if let (Some(mode), "CONNECT") = (&cfg.proxy, info.method.as_str()) {
            let early = std::mem::take(&mut buf);
            return super::relay::tunnel(s, early, &info.target, mode, log, idx).await;
        }
        let gap = last_response_end
            .map(|t| head_started.map_or(t.elapsed(), |h| h.saturating_duration_since(t)));
        log_request(log, idx, &info, gap);
        if over_limit {
            let why = "over the audit's connection limit (--max-connections)";
            reject(&mut s, (503, why), log, idx).await;
            return Ending::OverLimit;
        }
        // The request body.
        let body = match read_body(&mut s, &mut buf, &mut chunk, &info, &cfg.server).await {
            Ok(b) => b,
            Err(end) => {
                match end {
                    Ending::TooLarge => {
                        let why = "the request body is over the audit's limit (--max-body-bytes)";
                        reject(&mut s, (413, why), log, idx).await;
                    }
                    Ending::Stalled => {
                        let why = "the request body stalled past the audit's timeout";
                        reject(&mut s, (408, why), log, idx).await;
                    }
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
        let response = match (&cfg.proxy, &cfg.upstream) {
            (Some(mode), _) => {
                match super::proxy::forward_proxied(mode, &info, &body, conn).await {
                    Ok((r, origin)) => {
                        with_log(log, |g| {
                            *g.conns[idx].origins.entry(origin).or_default() += 1
                        });
                        r
                    }
                    Err((status, why)) => own_answer(log, idx, status, &why),
                }
            }
            (None, None) => local_response(&info, &cfg.server, conn).await,
            (None, Some(up)) => match forward(up, &info, &body, conn).await {
                Ok(r) => r,
                Err(e) => {
                    let why = format!("upstream failed: {e:#}");
                    own_answer(log, idx, 502, &why)
                }
            },
        };
        if let Err(end) = write_response(&mut s, response, log, idx).await {
            return end;
        }
        last_response_end = Some(Instant::now());
        if !keep {
            let _ = s.shutdown().await;
            return Ending::ServerClosed;
        }
    }
}

/// Read a request head into `buf`: its length, its line and headers, and when its first
/// byte came (`None` when it was already buffered). How the connection ended instead:
/// the client closed, reset or stalled, or sent a head too large or not HTTP (answered
/// 431 or 400 first).
async fn read_head<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    buf: &mut Vec<u8>,
    chunk: &mut [u8],
    cfg: &AuditConfig,
    log: &SharedLog,
    idx: usize,
) -> Result<(usize, RequestLine, Option<Instant>), Ending> {
    let mut head_started: Option<Instant> = None;
    loop {
        if !buf.is_empty() {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(buf) {
                Ok(httparse::Status::Complete(n)) if n <= cfg.server.max_header_bytes => {
                    return Ok((n, RequestLine::from(&req), head_started))
                }
                Ok(httparse::Status::Partial) if buf.len() <= cfg.server.max_header_bytes => {}
                Ok(_) | Err(httparse::Error::TooManyHeaders) => {
                    let why = "the request head is over the audit's limit (--max-header-bytes)";
                    reject(s, (431, why), log, idx).await;
                    return Err(Ending::TooLarge);
                }
                Err(e) => {
                    let why = format!("the request is not HTTP/1.x ({e})");
                    reject(s, (400, &why), log, idx).await;
                    return Err(Ending::Garbage);
                }
            }
        }
        let limit = match head_started {
            None => cfg.server.idle_timeout,
            Some(t) => cfg.server.header_timeout.saturating_sub(t.elapsed()),
        };
        match tokio::time::timeout(limit, s.read(chunk)).await {
            Err(_) if buf.is_empty() => return Err(Ending::IdleTimeout),
            Err(_) => {
                let why = "the request head stalled past the audit's timeout (--header-timeout)";
                reject(s, (408, why), log, idx).await;
                return Err(Ending::Stalled);
            }
            Ok(Ok(0)) if buf.is_empty() => return Err(Ending::ClientClosed),
            // Over TLS, a FIN without a `close_notify` alert (Node, most clients that
            // destroy their socket): between requests it is a close like any other.
            Ok(Err(e)) if buf.is_empty() && e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(Ending::ClientClosed)
            }
            Ok(Ok(0)) => return Err(Ending::ClientClosedMidRequest),
            Ok(Err(e)) if buf.is_empty() && is_reset(&e) => {
                let unread = with_log(log, |g| g.conns[idx].last_body > 0);
                return Err(if unread {
                    Ending::ClientClosedUnread
                } else {
                    Ending::ClientReset
                });
            }
            Ok(Err(_)) => return Err(Ending::ClientClosedMidRequest),
            Ok(Ok(n)) => {
                head_started.get_or_insert_with(Instant::now);
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// A request in the log: its version, its `Connection` header, proxy headers, and the
/// gap since the connection's last response.
fn log_request(log: &SharedLog, idx: usize, info: &RequestLine, gap: Option<Duration>) {
    with_log(log, |g| {
        g.timeline.request();
        let c = &mut g.conns[idx];
        c.requests += 1;
        *c.versions
            .entry(format!("HTTP/1.{}", info.minor))
            .or_default() += 1;
        *c.connection_headers
            .entry(info.connection.clone())
            .or_default() += 1;
        c.forwarded += u64::from(info.forwarded);
        if c.user_agent.is_none() {
            c.user_agent = info
                .headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("user-agent"))
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned());
        }
        if let Some(gap) = gap {
            c.gaps.add(gap.as_secs_f64() * 1000.0);
        }
    });
}

/// Write a response (its head and first bytes, then `extra_fill` bytes of FILL), logged
/// as answered; a client that left mid-response is logged with how much was written.
async fn write_response<S: AsyncWrite + Unpin>(
    s: &mut S,
    (bytes, extra_fill, body_len): (Vec<u8>, u64, u64),
    log: &SharedLog,
    idx: usize,
) -> Result<(), Ending> {
    with_log(log, |g| g.conns[idx].last_body = body_len);
    let cut = |written: u64| {
        with_log(log, |g| g.conns[idx].cut = Some((written, body_len)));
        Ending::ClientClosedMidResponse
    };
    if s.write_all(&bytes).await.is_err() {
        return Err(cut(0));
    }
    // The body bytes written with the head; the rest comes from FILL.
    let mut written = body_len - extra_fill;
    let mut left = extra_fill;
    while left > 0 {
        let n = left.min(FILL.len() as u64) as usize;
        if s.write_all(&FILL[..n]).await.is_err() {
            return Err(cut(written));
        }
        written += n as u64;
        left -= n as u64;
    }
    if s.flush().await.is_err() {
        return Err(cut(written));
    }
    // "HTTP/1.1 404 ...": the status the client got.
    let status = bytes
        .get(9..12)
        .and_then(|d| std::str::from_utf8(d).ok())
        .and_then(|d| d.parse::<u16>().ok());
    with_log(log, |g| {
        let c = &mut g.conns[idx];
        c.responses += 1;
        if let Some(code) = status {
            *c.statuses.entry(code).or_default() += 1;
        }
    });
    Ok(())
}

/// Read (and keep, for forwarding) the request body.
pub(super) async fn read_body<S: AsyncRead + Unpin>(
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
pub(super) async fn read_more<S: AsyncRead + Unpin>(
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
