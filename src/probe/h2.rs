//! One HTTP/2 connection driven step by step, for `trace --http2` and `doctor`: open it
//! (dns, connect, tls with ALPN h2, then the preface and the server's SETTINGS, timed),
//! exchange requests on its streams (one at a time, or many at once), and watch for the
//! server's GOAWAY or close. Runs inside a `LocalSet` (the connection is driven by a
//! local task).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use rustls::ClientConfig;
use serde::Serialize;
use tokio::sync::Notify;

use super::{err, open as open_stream, Opened, ProbeError};
use crate::net::dns::DnsSettings;
use crate::net::Origin;
use crate::proto::h2::client::{
    alpn_refused, await_settings, exchange, handshake, no_settings, Handshaken, SettingsWait,
    Stopped, StreamRequest,
};
use crate::proto::h2::wire::{error_code_name, GoAway, Seen, ServerSettings};
use crate::proto::h2::{classify, StreamFailure};
use crate::record::notes::Taken;
use crate::record::{ErrorKind, Phase, Phases};

/// An open HTTP/2 connection and what opening it cost.
pub(crate) struct H2Probe {
    /// dns, connect and tls of the underlying connection (its `conn` is spent).
    pub dns: Option<Duration>,
    pub connect: Duration,
    /// Through a forward proxy (`connect` is then to it), and the `CONNECT` round trip.
    pub proxied: bool,
    pub tunnel: Option<Duration>,
    pub tls: Option<Duration>,
    pub tls_info: Option<super::TlsInfo>,
    /// The preface sent to the server's SETTINGS received.
    pub h2_setup: Duration,
    pub settings: ServerSettings,
    send: SendRequest<Bytes>,
    seen: Rc<RefCell<Seen>>,
    /// Set when the connection has ended; `ended` is notified then.
    closed_at: Rc<Cell<Option<Instant>>>,
    ended: Rc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for H2Probe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One stream's request and response.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct H2Exchange {
    pub stream_id: u32,
    pub status: u16,
    pub send: Duration,
    pub wait: Duration,
    pub receive: Duration,
    pub body_bytes: u64,
    /// What a 3xx to 5xx response said.
    pub said: Option<Box<str>>,
}

/// Open an HTTP/2 connection: ALPN h2 over TLS (the config must offer it), prior
/// knowledge over cleartext.
pub(crate) async fn open(
    origin: &Origin,
    tls: Option<&Arc<ClientConfig>>,
    timeout: Duration,
    dns: &DnsSettings,
) -> Result<H2Probe, ProbeError> {
    let Opened {
        conn,
        dns: dns_time,
        connect,
        proxied,
        tunnel,
        tls: tls_time,
        tls_info,
        ..
    } = open_stream(origin, tls, timeout, dns).await?;
    let alpn = tls_info.as_ref().and_then(|t| t.alpn.as_deref());
    if alpn_refused(origin.tls, alpn.map(str::as_bytes)) {
        return Err(err(
            ErrorKind::Tls,
            "the server did not choose h2 by ALPN: it does not offer HTTP/2 over TLS",
        ));
    }
    let Handshaken {
        send,
        connection,
        seen,
        settings_came,
        started,
    } = tokio::time::timeout(timeout, handshake(conn.into_stream()))
        .await
        .map_err(|_| err(ErrorKind::TimeoutH2Setup, "the HTTP/2 handshake timed out"))?
        .map_err(|e| err(ErrorKind::Protocol, format!("HTTP/2 handshake: {e}")))?;
    let closed_at = Rc::new(Cell::new(None));
    let ended = Rc::new(Notify::new());
    let task = {
        let closed_at = closed_at.clone();
        let ended = ended.clone();
        let settings_came = settings_came.clone();
        tokio::task::spawn_local(async move {
            let _ = connection.await;
            closed_at.set(Some(Instant::now()));
            ended.notify_waiters();
            settings_came.notify_one();
        })
    };
    let limit = Instant::now() + timeout;
    let sleep = std::pin::pin!(tokio::time::sleep_until(limit.into()));
    let came = await_settings(
        &seen,
        &settings_came,
        || closed_at.get().is_some(),
        sleep,
        limit,
    )
    .await;
    let (settings_at, settings) = match came {
        SettingsWait::Came(at, settings) => (at, settings),
        SettingsWait::TimedOut => {
            task.abort();
            return Err(err(
                ErrorKind::TimeoutH2Setup,
                format!("no SETTINGS from the server within {timeout:?}"),
            ));
        }
        SettingsWait::Ended => {
            return Err(err(ErrorKind::Protocol, no_settings(&seen.borrow()).says()));
        }
    };
    Ok(H2Probe {
        dns: dns_time,
        connect,
        proxied,
        tunnel,
        tls: tls_time,
        tls_info,
        h2_setup: settings_at.saturating_duration_since(started),
        settings,
        send,
        seen,
        closed_at,
        ended,
        task,
    })
}

fn stream_err(f: StreamFailure, what: &str) -> ProbeError {
    let detail = f.failure.detail.map_or("", |d| d.name());
    ProbeError {
        key: f.failure.key(),
        ..err(f.failure.kind, format!("{what}: {detail}"))
    }
}

impl H2Probe {
    /// The GOAWAY the server sent, if any.
    pub(crate) fn goaway(&self) -> Option<GoAway> {
        self.seen.borrow().goaway
    }

    /// Whether a new stream can start (no GOAWAY, not closed).
    pub(crate) fn usable(&self) -> bool {
        self.goaway().is_none() && self.closed_at.get().is_none()
    }

    /// Send `head` (and `body`) on a new stream and read the whole response.
    pub(crate) async fn exchange(
        &self,
        (head, body): (&http::Request<()>, Option<&[u8]>),
        timeout: Duration,
    ) -> Result<H2Exchange, ProbeError> {
        let t0 = Instant::now();
        let deadline = t0 + timeout;
        let req = StreamRequest {
            head,
            body,
            deadline,
            wait: None,
            min_speed: None,
            taken: Taken::default(),
        };
        let sleep = std::pin::pin!(tokio::time::sleep_until(deadline.into()));
        let mut phases = Phases::default();
        let answered = exchange(self.send.clone(), req, sleep, t0, &mut phases, &mut 0).await;
        let a = answered.map_err(|stopped| match stopped {
            Stopped::Deadline(Phase::Send) => err(ErrorKind::TimeoutSend, "no stream slot in time"),
            Stopped::Deadline(Phase::Receive) => {
                err(ErrorKind::TimeoutReceive, "the body did not end in time")
            }
            Stopped::Deadline(_) => err(ErrorKind::TimeoutWait, "no response head in time"),
            Stopped::Limit(f) => stream_err(
                StreamFailure {
                    failure: f,
                    refused: false,
                },
                "the response",
            ),
            Stopped::Stream(e, id, in_body) => {
                let what = match (id, in_body) {
                    (None, _) => "opening a stream",
                    (Some(_), false) => "the response",
                    (Some(_), true) => "the body",
                };
                stream_err(classify(&e, self.goaway(), id, in_body), what)
            }
        })?;
        let d = |v: Option<u64>| Duration::from_nanos(v.unwrap_or(0));
        Ok(H2Exchange {
            stream_id: a.stream_id,
            status: a.status,
            send: d(phases[Phase::Send]),
            wait: d(phases[Phase::Wait]),
            receive: d(phases[Phase::Receive]),
            body_bytes: a.body_bytes,
            said: a.said,
        })
    }

    /// Wait up to `limit` for the server to end the connection (GOAWAY or close); the
    /// time it took, from now.
    pub(crate) async fn server_ends_within(&self, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        let deadline = start + limit;
        loop {
            if self.goaway().is_some() || self.closed_at.get().is_some() {
                return Some(start.elapsed());
            }
            // GOAWAY arrives as bytes: look again every few ms (the connection task may
            // not end until the client closes too).
            let step = (Instant::now() + Duration::from_millis(5)).min(deadline);
            let _ = tokio::time::timeout_at(step.into(), self.ended.notified()).await;
            if Instant::now() >= deadline {
                return (self.goaway().is_some() || self.closed_at.get().is_some())
                    .then(|| start.elapsed());
            }
        }
    }

    /// The GOAWAY as words: "GOAWAY no_error (last stream 7)".
    pub(crate) fn describe_goaway(&self) -> Option<String> {
        self.goaway().map(|g| {
            format!(
                "GOAWAY {} (last stream {})",
                error_code_name(g.error_code),
                g.last_stream_id
            )
        })
    }
}
