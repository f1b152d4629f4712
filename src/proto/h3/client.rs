//! The HTTP/3 client connection, over quinn (QUIC with rustls) and the `h3` crate,
//! written once for the engine's driver and the probes of `trace` and `doctor`: a
//! thread's QUIC endpoints and the transport settings every connection is opened with
//! (`Endpoints`), HTTP/3 started on a connection (`Live`), a request's exchange on a
//! new stream, timed (`exchange`), and a 0-RTT exchange raced against the server's
//! verdict on the early data (`race_verdict`). What a connection costs the recorder is
//! the engine's to count.

use std::cell::{Cell, RefCell};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use tokio::task::AbortHandle;

use super::{classify_connection, H3_NO_ERROR};
use crate::record::notes::{PendingExample, Taken};
use crate::record::{ns, ErrorDetail, ErrorKind, Failure, Phase, Phases};

/// The request side of an HTTP/3 connection.
pub(crate) type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// A thread's QUIC endpoints (one UDP socket per address family, made on first use)
/// and the transport settings of its connections.
pub(crate) struct Endpoints {
    sockets: RefCell<[Option<quinn::Endpoint>; 2]>,
    pub transport: Arc<quinn::TransportConfig>,
}

impl Endpoints {
    pub(crate) fn new() -> Rc<Endpoints> {
        let mut t = quinn::TransportConfig::default();
        // Windows large enough that a response is never held up by the client's flow
        // control across a long round trip.
        t.stream_receive_window(quinn::VarInt::from_u32(16 << 20));
        t.receive_window(quinn::VarInt::from_u32(64 << 20));
        Rc::new(Endpoints {
            sockets: RefCell::new([None, None]),
            transport: Arc::new(t),
        })
    }

    /// Wait (briefly) for the connections' closes to go out before the runtime ends.
    pub(crate) async fn close_all(&self) {
        let sockets: Vec<quinn::Endpoint> =
            self.sockets.borrow().iter().flatten().cloned().collect();
        for e in sockets {
            let _ = tokio::time::timeout(Duration::from_millis(250), e.wait_idle()).await;
        }
    }

    pub(crate) fn get(
        &self,
        remote: SocketAddr,
        local: &[IpAddr],
    ) -> std::io::Result<quinn::Endpoint> {
        let i = usize::from(remote.is_ipv6());
        if let Some(e) = &self.sockets.borrow()[i] {
            return Ok(e.clone());
        }
        let ip = local
            .iter()
            .copied()
            .find(|ip| ip.is_ipv6() == remote.is_ipv6())
            .unwrap_or(if remote.is_ipv6() {
                IpAddr::V6(Ipv6Addr::UNSPECIFIED)
            } else {
                IpAddr::V4(Ipv4Addr::UNSPECIFIED)
            });
        let e = crate::net::quic::endpoint(SocketAddr::new(ip, 0), None)?;
        self.sockets.borrow_mut()[i] = Some(e.clone());
        Ok(e)
    }
}

/// One QUIC connection carrying HTTP/3.
pub(crate) struct Live {
    pub conn: quinn::Connection,
    pub send: SendRequest,
    /// The task polling h3's connection (its control streams).
    pub driver: AbortHandle,
}

impl Live {
    /// Start HTTP/3 on `conn` (its control stream and SETTINGS; with 0-RTT, in early
    /// data).
    pub(crate) async fn start(conn: quinn::Connection) -> Result<Live, Failure> {
        let (mut driver, send) =
            match h3::client::new(h3_quinn::Connection::new(conn.clone())).await {
                Ok(x) => x,
                Err(_) => {
                    return Err(match conn.close_reason() {
                        Some(e) => classify_connection(&e, false),
                        None => Failure::new(ErrorKind::Protocol, ErrorDetail::H3Protocol),
                    })
                }
            };
        let driver = tokio::task::spawn_local(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        })
        .abort_handle();
        Ok(Live { conn, send, driver })
    }

    /// Close a connection whose handshake never completed (nothing is counted).
    pub(crate) fn abandon(&self) {
        self.conn.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
        self.driver.abort();
    }

    /// Close it (H3_NO_ERROR): the request's work is done.
    pub(crate) fn close(&self) {
        self.conn.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
        self.driver.abort();
    }
}

/// A response read to its end.
pub(crate) struct Got {
    pub stream_id: u64,
    pub status: u16,
    pub retry_after_s: Option<u32>,
    /// A redirect's `Location` (301, 302, 303, 307, 308), for `-L`.
    pub location: Option<Box<str>>,
    /// What a 3xx to 5xx response said, where the worker wanted its example.
    pub said: Option<Box<str>>,
    pub bytes: u64,
    pub body_bytes: u64,
    pub end: Instant,
}

/// Where a request's exchange stopped, and why.
pub(crate) struct Broke {
    pub error: h3::error::StreamError,
    pub phase: Phase,
}

/// Send the request on a new stream and read the response to its end, timing send,
/// wait and receive. `now`: a clock reading taken just before, where the send starts
/// (read here when `None`); `taken`: the statuses whose example the worker has.
pub(crate) async fn exchange(
    send: &mut SendRequest,
    (head, body): (&http::Request<()>, Option<&[u8]>),
    phases: &mut Phases,
    (phase, got_body): (&Cell<Phase>, &Cell<u64>),
    now: Option<Instant>,
    taken: Taken,
) -> Result<Got, Broke> {
    let broke = |error, phase| Broke { error, phase };
    phase.set(Phase::Send);
    let t_send = now.unwrap_or_else(Instant::now);
    let mut stream = send
        .send_request(head.clone())
        .await
        .map_err(|e| broke(e, Phase::Send))?;
    if let Some(body) = body {
        stream
            .send_data(Bytes::copy_from_slice(body))
            .await
            .map_err(|e| broke(e, Phase::Send))?;
    }
    stream.finish().await.map_err(|e| broke(e, Phase::Send))?;
    let t_sent = Instant::now();
    phases[Phase::Send] = Some(ns(t_send, t_sent));
    phase.set(Phase::Wait);
    let resp = stream
        .recv_response()
        .await
        .map_err(|e| broke(e, Phase::Wait))?;
    let t_head = Instant::now();
    phases[Phase::Wait] = Some(ns(t_sent, t_head));
    phase.set(Phase::Receive);
    // The head as decoded (QPACK hides the bytes on the wire): status line and fields.
    let head_bytes = 3 + resp
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().len() + v.len() + 4) as u64)
        .sum::<u64>();
    let location = resp.headers().get(http::header::LOCATION);
    let follow =
        crate::proto::redirect_location(resp.status().as_u16(), location.map(|v| v.as_bytes()));
    let mut example = PendingExample::new(
        "HTTP/3",
        resp.status().as_u16(),
        location.map(|v| v.as_bytes()),
        taken,
    );
    let mut said = None;
    let mut body_bytes = 0u64;
    while let Some(chunk) = stream
        .recv_data()
        .await
        .map_err(|e| broke(e, Phase::Receive))?
    {
        if let Some(e) = example.take() {
            said = Some(e.body(chunk.chunk()));
        }
        body_bytes += chunk.remaining() as u64;
        got_body.set(body_bytes);
    }
    if let Some(e) = example {
        said = Some(e.body(&[]));
    }
    let end = Instant::now();
    phases[Phase::Receive] = Some(ns(t_head, end));
    Ok(Got {
        stream_id: stream.id().into_inner(),
        status: resp.status().as_u16(),
        location: follow,
        said,
        retry_after_s: resp
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| crate::proto::h1::response::retry_after_seconds(v.as_bytes())),
        bytes: head_bytes + body_bytes,
        body_bytes,
        end,
    })
}

/// 0-RTT: a request's exchange raced against the server's verdict on the early data
/// (it comes with the handshake's end). Returns the exchange's result, unless the server
/// rejected the early data before it ended, and the verdict with when it came, if it
/// came first.
pub(crate) async fn race_verdict<R>(
    ex: impl std::future::Future<Output = R>,
    accepted: &mut Pin<&mut quinn::ZeroRttAccepted>,
) -> (Option<R>, Option<(bool, Instant)>) {
    let mut ex = std::pin::pin!(ex);
    let mut verdict = None;
    loop {
        tokio::select! {
            a = &mut *accepted, if verdict.is_none() => {
                verdict = Some((a, Instant::now()));
                if !a {
                    return (None, verdict);
                }
            }
            r = &mut ex => return (Some(r), verdict),
        }
    }
}
