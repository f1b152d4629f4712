//! The audit's HTTP/2 side: clients that choose h2 by ALPN (with `--tls`) or speak it by
//! prior knowledge on the plain listener. Every stream is answered here or forwarded to
//! the HTTP/1.1 `--upstream`; the connection's streams, how many were in flight at once,
//! the idle gaps between them and how the connection ended are logged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use tokio::io::{AsyncRead, AsyncWrite};

use super::answer::{forwarded, is_reset, local_response, AuditConfig, RequestLine, HOP_BY_HOP};
use super::log::{answered_itself, with_log, Ending, SharedLog};
use super::proxy::forward;
use crate::server::routes::{ConnHeader, FILL};

/// How long an idle connection stays after the audit's GOAWAY.
const GOAWAY_GRACE: Duration = Duration::from_secs(1);

/// Serve one HTTP/2 connection; returns how it ended.
pub(super) async fn serve<S>(io: S, shared: Arc<(AuditConfig, SharedLog)>, idx: usize) -> Ending
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let cfg = &shared.0;
    with_log(&shared.1, |g| g.conns[idx].h2 = true);
    let mut conn = match tokio::time::timeout(
        cfg.server.header_timeout,
        h2::server::Builder::new()
            .max_concurrent_streams(cfg.server.max_concurrent_streams)
            .handshake::<_, Bytes>(io),
    )
    .await
    {
        Ok(Ok(c)) => c,
        // Closed (or reset) before the preface: a connection the client did not use.
        Ok(Err(e)) => {
            return match e.get_io() {
                Some(io) if is_reset(io) => Ending::ClientReset,
                Some(_) => Ending::ClientClosed,
                None => Ending::Garbage,
            }
        }
        Err(_) => return Ending::Stalled,
    };
    let streams = Arc::new(Streams {
        in_flight: AtomicU64::new(0),
        idle_since: Mutex::new(Some(Instant::now())),
        first: Mutex::new(true),
    });
    let mut goaway_sent = false;
    loop {
        let wait = if goaway_sent {
            GOAWAY_GRACE
        } else {
            cfg.server.idle_timeout
        };
        match tokio::time::timeout(wait, conn.accept()).await {
            Err(_) if goaway_sent => return Ending::IdleTimeout,
            Err(_) => {
                if streams.in_flight.load(Ordering::SeqCst) == 0 {
                    conn.graceful_shutdown();
                    goaway_sent = true;
                }
            }
            Ok(None) if goaway_sent => return Ending::IdleTimeout,
            Ok(None) => return Ending::ClientClosed,
            Ok(Some(Err(e))) => {
                return match e.get_io() {
                    Some(io) if is_reset(io) => Ending::ClientReset,
                    Some(_) => Ending::ClientClosed,
                    None if e.is_go_away() && e.is_remote() => Ending::ClientClosed,
                    None => Ending::Garbage,
                }
            }
            Ok(Some(Ok((req, respond)))) => {
                let now_in_flight = streams.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                let gap = if now_in_flight == 1 {
                    let was_idle = lock(&streams.idle_since).take();
                    let first = std::mem::replace(&mut *lock(&streams.first), false);
                    was_idle.filter(|_| !first).map(|t| t.elapsed())
                } else {
                    None
                };
                with_log(&shared.1, |g| {
                    g.timeline.request();
                    let c = &mut g.conns[idx];
                    c.requests += 1;
                    c.peak_streams = c.peak_streams.max(now_in_flight);
                    *c.versions.entry("HTTP/2".into()).or_default() += 1;
                    c.forwarded += u64::from(forwarded(req.headers()));
                    if c.user_agent.is_none() {
                        c.user_agent = req
                            .headers()
                            .get(http::header::USER_AGENT)
                            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
                    }
                    if let Some(gap) = gap {
                        c.gaps.add(gap.as_secs_f64() * 1000.0);
                    }
                });
                let shared = shared.clone();
                let streams = streams.clone();
                tokio::spawn(async move {
                    let done = answer(req, respond, &shared, idx).await;
                    with_log(&shared.1, |g| {
                        let c = &mut g.conns[idx];
                        match done {
                            Ok(status) => {
                                c.responses += 1;
                                *c.statuses.entry(status).or_default() += 1;
                            }
                            Err(cut) => c.cut = Some(cut),
                        }
                    });
                    if streams.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
                        *lock(&streams.idle_since) = Some(Instant::now());
                    }
                });
            }
        }
    }
}

/// A connection's streams in flight, and since when it has had none.
struct Streams {
    in_flight: AtomicU64,
    idle_since: Mutex<Option<Instant>>,
    /// No stream has come yet (the wait before the first is not an idle gap).
    first: Mutex<bool>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The request as the HTTP/1 side (local routes, forwarding) sees it.
fn request_line(parts: &http::request::Parts, body_len: usize) -> RequestLine {
    let headers = parts
        .headers
        .iter()
        .filter(|(k, _)| {
            let k = k.as_str();
            !HOP_BY_HOP.contains(&k) && k != "host" && k != "content-length"
        })
        .map(|(k, v)| (k.as_str().to_string(), v.as_bytes().to_vec()))
        .collect();
    RequestLine {
        method: parts.method.as_str().to_string(),
        target: parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string(),
        minor: 1,
        connection: "none".into(),
        close: false,
        keep_alive: false,
        content_length: Some(body_len as u64),
        chunked: false,
        forwarded: forwarded(&parts.headers),
        headers,
    }
}

/// Answer one stream. Err: the client cut the response off (body bytes written, all).
async fn answer(
    req: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    shared: &(AuditConfig, SharedLog),
    idx: usize,
) -> Result<u16, (u64, u64)> {
    let cfg = &shared.0;
    let (parts, mut body) = req.into_parts();
    let mut data = Vec::new();
    let deadline = Instant::now() + cfg.server.header_timeout;
    loop {
        match tokio::time::timeout_at(deadline.into(), body.data()).await {
            Ok(None) => break,
            Ok(Some(Ok(chunk))) => {
                let _ = body.flow_control().release_capacity(chunk.len());
                data.extend_from_slice(&chunk);
                if data.len() as u64 > cfg.server.max_body_bytes {
                    let why = "the request body is over the audit's limit (--max-body-bytes)";
                    answered_itself(&shared.1, idx, 413, why);
                    let _ = send_head(&mut respond, 413, &[], true);
                    return Ok(413);
                }
            }
            Ok(Some(Err(_))) | Err(_) => return Err((0, 0)),
        }
    }
    let info = request_line(&parts, data.len());
    let (bytes, extra_fill, body_len) = match &cfg.upstream {
        None => local_response(&info, &cfg.server, ConnHeader::None).await,
        Some(up) => match forward(up, &info, &data, ConnHeader::None).await {
            Ok(r) => r,
            Err(e) => {
                let why = format!("upstream failed: {e:#}");
                answered_itself(&shared.1, idx, 502, &why);
                let msg = format!("handshake audit: {why}\n");
                let mut stream = send_head(&mut respond, 502, &[], false).map_err(|_| (0, 0))?;
                let _ = stream.send_data(Bytes::from(msg), true);
                return Ok(502);
            }
        },
    };
    // The HTTP/1 response becomes an HTTP/2 one: status and end-to-end headers.
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let Ok(httparse::Status::Complete(head_len)) = resp.parse(&bytes) else {
        let why = "the upstream's response head could not be read";
        answered_itself(&shared.1, idx, 502, why);
        let _ = send_head(&mut respond, 502, &[], true);
        return Ok(502);
    };
    let status = resp.code.unwrap_or(502);
    let keep: Vec<(String, Vec<u8>)> = resp
        .headers
        .iter()
        .filter(|h| {
            let n = h.name.to_ascii_lowercase();
            !HOP_BY_HOP.contains(&n.as_str())
        })
        .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
        .collect();
    let inline = &bytes[head_len..];
    let ends = body_len == 0;
    let mut stream = send_head(&mut respond, status, &keep, ends).map_err(|_| (0, body_len))?;
    if ends {
        return Ok(status);
    }
    let mut written = 0u64;
    let mut inline_left = inline;
    let mut fill_left = extra_fill;
    while written < body_len {
        stream.reserve_capacity((body_len - written).min(FILL.len() as u64) as usize);
        let granted = match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(Ok(n)) => n,
            _ => return Err((written, body_len)),
        };
        if granted == 0 {
            continue;
        }
        let part = if !inline_left.is_empty() {
            let n = granted.min(inline_left.len());
            let b = Bytes::copy_from_slice(&inline_left[..n]);
            inline_left = &inline_left[n..];
            b
        } else {
            let n = (granted as u64).min(fill_left).min(FILL.len() as u64) as usize;
            fill_left -= n as u64;
            Bytes::from_static(&FILL[..n])
        };
        written += part.len() as u64;
        if stream.send_data(part, written >= body_len).is_err() {
            return Err((written, body_len));
        }
    }
    Ok(status)
}

fn send_head(
    respond: &mut SendResponse<Bytes>,
    status: u16,
    headers: &[(String, Vec<u8>)],
    end: bool,
) -> Result<h2::SendStream<Bytes>, h2::Error> {
    let mut b = http::Response::builder().status(status);
    for (k, v) in headers {
        b = b.header(k.as_str(), v.as_slice());
    }
    let head = b.body(()).unwrap_or_else(|_| {
        let mut r = http::Response::new(());
        *r.status_mut() = http::StatusCode::BAD_GATEWAY;
        r
    });
    respond.send_response(head, end)
}
