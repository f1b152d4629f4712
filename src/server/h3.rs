//! The embedded server's HTTP/3 (quinn + h3) on UDP at the HTTPS listener's port: the
//! same routes as HTTP/1 and HTTP/2; session tickets (stateful, each used once), 0-RTT
//! requests taken with `--early-data on` and answered at once (0.5-RTT). Counts its QUIC
//! connections once their handshake completes, full or resumed (read off the handshake
//! messages it sends: a resumed handshake carries no certificate), their requests, and
//! 0-RTT: connections that read 0-RTT packets (exact: counted as the 0-RTT key opens
//! them), and requests whose stream was taken while the handshake was still under way
//! (quinn's own `is_0rtt` rule; h3-quinn hides quinn's streams, so the connection is
//! wrapped to see each stream as it comes). The second is exact while the server keeps
//! up; a server so busy that it takes a 0-RTT request's stream only after the client's
//! Finished (a round trip later) counts it as a 1-RTT one, so it is a lower bound.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use anyhow::Context as _;
use bytes::Bytes;

use super::routes::{answer as answer_for, empty_head, route_of, FILL};
use super::Shared;
use crate::net::quic::{ServerSeen, WatchingServer};

type Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// A QUIC connection for h3 that notes which request streams came in 0-RTT.
struct Marking {
    inner: h3_quinn::Connection,
    seen: Option<Arc<crate::net::quic::Seen>>,
    early: Arc<Mutex<HashSet<h3::quic::StreamId>>>,
}

impl<B: bytes::Buf> h3::quic::OpenStreams<B> for Marking {
    type BidiStream = h3_quinn::BidiStream<B>;
    type SendStream = h3_quinn::SendStream<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, h3::quic::StreamErrorIncoming>> {
        h3::quic::OpenStreams::<B>::poll_open_bidi(&mut self.inner, cx)
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, h3::quic::StreamErrorIncoming>> {
        h3::quic::OpenStreams::<B>::poll_open_send(&mut self.inner, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        h3::quic::OpenStreams::<B>::close(&mut self.inner, code, reason)
    }
}

impl<B: bytes::Buf> h3::quic::Connection<B> for Marking {
    type RecvStream = h3_quinn::RecvStream;
    type OpenStreams = h3_quinn::OpenStreams;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::RecvStream, h3::quic::ConnectionErrorIncoming>> {
        h3::quic::Connection::<B>::poll_accept_recv(&mut self.inner, cx)
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, h3::quic::ConnectionErrorIncoming>> {
        let got = h3::quic::Connection::<B>::poll_accept_bidi(&mut self.inner, cx);
        if let (Poll::Ready(Ok(stream)), Some(seen)) = (&got, &self.seen) {
            if !seen.handshaken() && seen.early_packets() > 0 {
                let id = h3::quic::RecvStream::recv_id(stream);
                self.early
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id);
            }
        }
        got
    }

    fn opener(&self) -> Self::OpenStreams {
        h3::quic::Connection::<B>::opener(&self.inner)
    }
}

/// Bind UDP `addr` and answer HTTP/3 there, on the current runtime.
pub(crate) fn bind(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    shared: Arc<Shared>,
) -> anyhow::Result<SocketAddr> {
    let crypto = WatchingServer::new(tls)?;
    let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(shared.cfg.max_concurrent_streams));
    if let Ok(idle) = quinn::IdleTimeout::try_from(shared.cfg.idle_timeout) {
        t.max_idle_timeout(Some(idle));
    }
    cfg.transport_config(Arc::new(t));
    let ep = crate::net::quic::endpoint(addr, Some(cfg))
        .with_context(|| format!("binding UDP {addr} for HTTP/3"))?;
    let bound = ep.local_addr()?;
    tokio::spawn(accept_loop(ep, shared));
    Ok(bound)
}

async fn accept_loop(ep: quinn::Endpoint, shared: Arc<Shared>) {
    while let Some(incoming) = ep.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            serve(incoming, &shared).await;
        });
    }
}

/// One QUIC connection: its handshake (answering 0-RTT requests meanwhile), then its
/// requests until the client leaves or the idle timeout.
async fn serve(incoming: quinn::Incoming, shared: &Arc<Shared>) {
    let Ok(mut connecting) = incoming.accept() else {
        return;
    };
    // The whole ClientHello first: its transport parameters hold the client's stream
    // limits, and a ClientHello in two Initials (a post-quantum key share) whose second
    // comes later would leave h3's control streams waiting to open, for good (quinn's
    // `open_uni` is not woken when the peer's parameters arrive): the request would never
    // be read.
    let hello = tokio::time::timeout(shared.cfg.header_timeout, connecting.handshake_data());
    if !matches!(hello.await, Ok(Ok(_))) {
        return;
    }
    // A server's into_0rtt always succeeds: requests in 0-RTT are answered before the
    // handshake completes.
    let Ok((conn, established)) = connecting.into_0rtt() else {
        return;
    };
    let st = &shared.stats;
    // What the connection's TLS session sees (there from the ClientHello on).
    let seen = conn
        .handshake_data()
        .and_then(|d| d.downcast::<ServerSeen>().ok())
        .map(|s| s.0.clone());
    let counted = {
        let conn = conn.clone();
        let shared = shared.clone();
        let seen = seen.clone();
        async move {
            let done = tokio::time::timeout(shared.cfg.header_timeout, established).await;
            if done.is_err() || conn.close_reason().is_some() {
                return false;
            }
            let st = &shared.stats;
            let full = seen.as_ref().is_none_or(|s| s.full());
            st.connections_accepted.fetch_add(1, Ordering::Relaxed);
            st.h3_connections.fetch_add(1, Ordering::Relaxed);
            if seen.is_some_and(|s| s.early_packets() > 0) {
                st.h3_early_data_connections.fetch_add(1, Ordering::Relaxed);
            }
            if full {
                st.tls_handshakes_full.fetch_add(1, Ordering::Relaxed);
                // A full handshake in which the client presented a certificate.
                if conn.peer_identity().is_some() {
                    st.tls_client_certificates.fetch_add(1, Ordering::Relaxed);
                }
            } else {
                st.tls_handshakes_resumed.fetch_add(1, Ordering::Relaxed);
            }
            true
        }
    };
    let counted = tokio::spawn(counted);
    st.open_connections.fetch_add(1, Ordering::Relaxed);
    let early = Arc::new(Mutex::new(HashSet::new()));
    let marking = Marking {
        inner: h3_quinn::Connection::new(conn.clone()),
        seen,
        early: early.clone(),
    };
    if let Ok(mut h3c) = h3::server::builder().build::<_, Bytes>(marking).await {
        while let Ok(Some(resolver)) = h3c.accept().await {
            let shared = shared.clone();
            let early = early.clone();
            tokio::spawn(async move {
                if let Ok((req, stream)) = resolver.resolve_request().await {
                    shared.stats.requests.fetch_add(1, Ordering::Relaxed);
                    shared.stats.h3_requests.fetch_add(1, Ordering::Relaxed);
                    let id = stream.id();
                    if early.lock().unwrap_or_else(|e| e.into_inner()).remove(&id) {
                        let st = &shared.stats;
                        st.early_data_requests.fetch_add(1, Ordering::Relaxed);
                        st.h3_early_data_requests.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = answer(req, stream, &shared).await;
                }
            });
        }
    }
    let _ = counted.await;
    st.open_connections.fetch_sub(1, Ordering::Relaxed);
}

/// Read (and drop) the request body, then answer by route.
async fn answer(
    req: http::Request<()>,
    mut stream: Stream,
    shared: &Shared,
) -> Result<(), h3::error::StreamError> {
    use bytes::Buf;
    let cfg = &shared.cfg;
    let mut got: u64 = 0;
    while let Some(chunk) = stream.recv_data().await? {
        got += chunk.remaining() as u64;
        if got > cfg.max_body_bytes {
            return send_empty(&mut stream, 413).await;
        }
    }
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let a = answer_for(route_of(target), shared).await;
    let Some(head) = a.head(None) else {
        return send_empty(&mut stream, 500).await;
    };
    stream.send_response(head).await?;
    if a.has_body(req.method()) {
        if let Some(b) = a.stats_body {
            stream.send_data(Bytes::from(b)).await?;
        } else {
            let mut left = a.body_len;
            while left > 0 {
                let n = left.min(FILL.len());
                stream.send_data(Bytes::from_static(&FILL[..n])).await?;
                left -= n;
            }
        }
    }
    stream.finish().await
}

async fn send_empty(stream: &mut Stream, status: u16) -> Result<(), h3::error::StreamError> {
    stream.send_response(empty_head(status)).await?;
    stream.finish().await
}
