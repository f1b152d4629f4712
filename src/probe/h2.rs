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
use crate::proto::h2::wire::{error_code_name, GoAway, Seen, ServerSettings, Watched};
use crate::proto::h2::{classify, StreamFailure};
use crate::record::ErrorKind;

/// An open HTTP/2 connection and what opening it cost.
pub struct H2Probe {
    /// dns, connect and tls of the underlying connection (its `conn` is spent).
    pub dns: Option<Duration>,
    pub connect: Duration,
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
pub struct H2Exchange {
    pub stream_id: u32,
    pub status: u16,
    pub send: Duration,
    pub wait: Duration,
    pub receive: Duration,
    pub body_bytes: u64,
}

/// Open an HTTP/2 connection: ALPN h2 over TLS (the config must offer it), prior
/// knowledge over cleartext.
pub async fn open(
    origin: &Origin,
    tls: Option<&Arc<ClientConfig>>,
    timeout: Duration,
    dns: &DnsSettings,
) -> Result<H2Probe, ProbeError> {
    let Opened {
        conn,
        dns: dns_time,
        connect,
        tls: tls_time,
        tls_info,
        ..
    } = open_stream(origin, tls, timeout, dns).await?;
    if origin.tls && tls_info.as_ref().and_then(|t| t.alpn.as_deref()) != Some("h2") {
        return Err(err(
            ErrorKind::Tls,
            "the server did not choose h2 by ALPN: it does not offer HTTP/2 over TLS",
        ));
    }
    let watched = Watched::new(conn.into_stream());
    let seen = watched.seen.clone();
    let settings_came = watched.settings_came.clone();
    let t = Instant::now();
    let (send, connection) = tokio::time::timeout(
        timeout,
        crate::proto::h2::client().handshake::<_, Bytes>(watched),
    )
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
    while seen.borrow().settings_at.is_none() && closed_at.get().is_none() {
        if tokio::time::timeout_at(limit.into(), settings_came.notified())
            .await
            .is_err()
        {
            task.abort();
            return Err(err(
                ErrorKind::TimeoutH2Setup,
                format!("no SETTINGS from the server within {timeout:?}"),
            ));
        }
    }
    let (settings_at, settings) = {
        let s = seen.borrow();
        (s.settings_at, s.settings)
    };
    let Some(settings_at) = settings_at else {
        let http1 = seen.borrow().http1_status_line.clone();
        return Err(err(
            ErrorKind::Protocol,
            match http1 {
                Some(line) => format!(
                    "the server answered the HTTP/2 preface with `{line}`: it speaks HTTP/1 only here"
                ),
                None => "the connection ended before the server's SETTINGS: it does not speak HTTP/2 here".to_string(),
            },
        ));
    };
    Ok(H2Probe {
        dns: dns_time,
        connect,
        tls: tls_time,
        tls_info,
        h2_setup: settings_at.saturating_duration_since(t),
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
    pub fn goaway(&self) -> Option<GoAway> {
        self.seen.borrow().goaway
    }

    /// Whether a new stream can start (no GOAWAY, not closed).
    pub fn usable(&self) -> bool {
        self.goaway().is_none() && self.closed_at.get().is_none()
    }

    /// Send `head` on a new stream and read the whole response.
    pub async fn exchange(
        &self,
        head: &http::Request<()>,
        timeout: Duration,
    ) -> Result<H2Exchange, ProbeError> {
        let t0 = Instant::now();
        let limit = t0 + timeout;
        let goaway = || self.seen.borrow().goaway;
        let send = tokio::time::timeout_at(limit.into(), self.send.clone().ready())
            .await
            .map_err(|_| err(ErrorKind::TimeoutSend, "no stream slot in time"))?
            .map_err(|e| stream_err(classify(&e, goaway(), None, false), "opening a stream"))?;
        let mut send = send;
        let (response, _stream) = send
            .send_request(head.clone(), true)
            .map_err(|e| stream_err(classify(&e, goaway(), None, false), "sending"))?;
        let id = response.stream_id().as_u32();
        let t_sent = Instant::now();
        let resp = tokio::time::timeout_at(limit.into(), response)
            .await
            .map_err(|_| err(ErrorKind::TimeoutWait, "no response head in time"))?
            .map_err(|e| stream_err(classify(&e, goaway(), Some(id), false), "the response"))?;
        let first = Instant::now();
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        let mut body_bytes = 0u64;
        loop {
            let next = tokio::time::timeout_at(limit.into(), body.data())
                .await
                .map_err(|_| err(ErrorKind::TimeoutReceive, "the body did not end in time"))?;
            match next {
                None => break,
                Some(Ok(chunk)) => {
                    body_bytes += chunk.len() as u64;
                    let _ = body.flow_control().release_capacity(chunk.len());
                }
                Some(Err(e)) => {
                    return Err(stream_err(
                        classify(&e, goaway(), Some(id), true),
                        "the body",
                    ))
                }
            }
        }
        let end = Instant::now();
        Ok(H2Exchange {
            stream_id: id,
            status,
            send: t_sent - t0,
            wait: first - t_sent,
            receive: end - first,
            body_bytes,
        })
    }

    /// Wait up to `limit` for the server to end the connection (GOAWAY or close); the
    /// time it took, from now.
    pub async fn server_ends_within(&self, limit: Duration) -> Option<Duration> {
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
    pub fn describe_goaway(&self) -> Option<String> {
        self.goaway().map(|g| {
            format!(
                "GOAWAY {} (last stream {})",
                error_code_name(g.error_code),
                g.last_stream_id
            )
        })
    }
}
