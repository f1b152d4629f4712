//! The embedded server's HTTP/2 connections (the `h2` crate): after ALPN `h2` on the
//! HTTPS listener, or the prior-knowledge preface on the plain one. The same routes as
//! HTTP/1; `--max-concurrent-streams`, `--max-requests-per-connection` (then GOAWAY) and
//! the idle timeout (GOAWAY, then close). Streams are counted with the requests.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::routes::{answer as answer_for, empty_head, route_of, FILL};
use super::Shared;

/// Serve one HTTP/2 connection until the client leaves, an error, the idle timeout
/// or the request limit. `tls`: over TLS (its responses advertise HTTP/3).
pub(crate) async fn serve<S>(io: S, shared: Arc<Shared>, tls: bool)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let cfg = &shared.cfg;
    let mut builder = h2::server::Builder::new();
    builder.max_concurrent_streams(cfg.max_concurrent_streams);
    let Ok(Ok(mut conn)) = tokio::time::timeout(cfg.header_timeout, builder.handshake(io)).await
    else {
        return;
    };
    shared.stats.h2_connections.fetch_add(1, Ordering::Relaxed);
    // Streams whose answer is still being sent (the idle timeout waits for them).
    let active = Arc::new(AtomicU64::new(0));
    let mut served: u64 = 0;
    let mut closing = false;
    let mut idle_goaway = false;
    loop {
        // After an idle GOAWAY the client gets a moment to see it, then the connection
        // is closed whatever it does.
        let wait = if idle_goaway {
            GOAWAY_GRACE
        } else {
            cfg.idle_timeout
        };
        let next = tokio::time::timeout(wait, conn.accept()).await;
        match next {
            Err(_) if idle_goaway => break,
            Err(_) => {
                if active.load(Ordering::Relaxed) == 0 {
                    // Idle: say GOAWAY, then close once the client has seen it.
                    if !closing {
                        conn.graceful_shutdown();
                        closing = true;
                    }
                    idle_goaway = true;
                }
                continue;
            }
            Ok(None) | Ok(Some(Err(_))) => break,
            Ok(Some(Ok((req, mut respond)))) => {
                if closing && cfg.max_requests_per_connection.is_some_and(|m| served >= m) {
                    // Sent before the client saw the GOAWAY: refused, so the client
                    // may send it again elsewhere (the limit is exact, as nginx's).
                    respond.send_reset(h2::Reason::REFUSED_STREAM);
                    continue;
                }
                served += 1;
                shared.stats.requests.fetch_add(1, Ordering::Relaxed);
                shared.stats.h2_streams.fetch_add(1, Ordering::Relaxed);
                if !closing && cfg.max_requests_per_connection.is_some_and(|m| served >= m) {
                    conn.graceful_shutdown();
                    closing = true;
                }
                active.fetch_add(1, Ordering::Relaxed);
                let shared = shared.clone();
                let active = active.clone();
                tokio::spawn(async move {
                    let _ = answer(req, respond, &shared, tls).await;
                    active.fetch_sub(1, Ordering::Relaxed);
                });
            }
        }
    }
}

/// Read (and drop) the request body, then answer by route.
async fn answer(
    req: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    shared: &Shared,
    tls: bool,
) -> Result<(), h2::Error> {
    let cfg = &shared.cfg;
    let (parts, mut body) = req.into_parts();
    let mut got: u64 = 0;
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        got += chunk.len() as u64;
        let _ = body.flow_control().release_capacity(chunk.len());
        if got > cfg.max_body_bytes {
            return send_empty(&mut respond, 413);
        }
    }
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let a = answer_for(route_of(target), shared).await;
    let Some(head) = a.head(shared.alt_svc(tls)) else {
        return send_empty(&mut respond, 500);
    };
    let left = if a.has_body(&parts.method) {
        a.body_len
    } else {
        0
    };
    let mut stream = respond.send_response(head, left == 0)?;
    if left == 0 {
        return Ok(());
    }
    if let Some(b) = a.stats_body {
        return stream.send_data(Bytes::from(b), true);
    }
    let mut left = left;
    while left > 0 {
        stream.reserve_capacity(left.min(FILL.len()));
        let granted = match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
            Some(Ok(n)) => n,
            Some(Err(e)) => return Err(e),
            None => return Ok(()),
        };
        let n = granted.min(left).min(FILL.len());
        if n == 0 {
            continue;
        }
        left -= n;
        stream.send_data(Bytes::from_static(&FILL[..n]), left == 0)?;
    }
    Ok(())
}

fn send_empty(respond: &mut SendResponse<Bytes>, status: u16) -> Result<(), h2::Error> {
    respond.send_response(empty_head(status), true).map(|_| ())
}

/// A stream with bytes already read from it put back in front (the HTTP/1 reader had
/// read the start of a prior-knowledge preface).
pub(super) struct Rewind<S> {
    prefix: Vec<u8>,
    pos: usize,
    inner: S,
}

impl<S> Rewind<S> {
    pub(super) fn new(prefix: Vec<u8>, inner: S) -> Rewind<S> {
        Rewind {
            prefix,
            pos: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.pos < me.prefix.len() {
            let n = (me.prefix.len() - me.pos).min(buf.remaining());
            buf.put_slice(&me.prefix[me.pos..me.pos + n]);
            me.pos += n;
            if me.pos == me.prefix.len() {
                me.prefix = Vec::new();
                me.pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut me.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// How long an idle connection stays after its GOAWAY for the client to close (it is
/// closed then anyway).
const GOAWAY_GRACE: Duration = Duration::from_secs(1);
