//! One QUIC connection carrying HTTP/3, driven step by step for `trace --http3`: open it
//! (dns, then the QUIC handshake, timed from the first Initial sent to the handshake's
//! end; with 0-RTT the request leaves before that end), exchange requests on its streams
//! one at a time, and watch for the server's close. quinn's own figures (its RTT
//! estimate, packets and datagrams) are read after each response. Runs inside a
//! `LocalSet` (h3's connection is driven by a local task).

use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{err, resolve, ProbeError, TlsInfo};
use crate::net::dns::DnsSettings;
use crate::net::quic::{QuicTls, Seen};
use crate::net::{classify_connect_error, Origin};
use crate::plan::Target;
use crate::proto::h3::client::{exchange, race_verdict, Endpoints, Live};
use crate::proto::h3::{classify_connection, classify_stream, H3_NO_ERROR};
use crate::record::notes::Taken;
use crate::record::{ErrorKind, Failure, Phase, Phases};
pub(crate) use crate::report::trace::QuicInfo;

/// An open QUIC connection with HTTP/3 on it.
pub(crate) struct H3Probe {
    conn: quinn::Connection,
    live: Live,
    seen: Arc<Seen>,
    pub dns: Option<Duration>,
    /// The first Initial sent.
    started: Instant,
    /// The handshake completed this long after the first Initial (with 0-RTT, known
    /// once the first exchange has seen the server's verdict on the early data).
    pub handshake: Option<Duration>,
    /// After the handshake, HTTP/3's start: its control stream opened and SETTINGS
    /// sent (with 0-RTT this happens before the request leaves, inside that lead).
    pub h3_setup: Option<Duration>,
    /// 0-RTT was asked for but could not be tried: no session to resume that allows
    /// early data (none yet, or the server's tickets allow none).
    pub early_unavailable: bool,
    /// 0-RTT: the server's verdict, still to come.
    accepted: Option<quinn::ZeroRttAccepted>,
}

impl Drop for H3Probe {
    fn drop(&mut self) {
        self.live.driver.abort();
    }
}

/// One stream's request and response.
#[derive(Debug, Clone)]
pub(crate) struct H3Exchange {
    pub stream_id: u64,
    pub status: u16,
    pub send: Duration,
    pub wait: Duration,
    pub receive: Duration,
    pub body_bytes: u64,
    /// 0-RTT: the request left this long after the first Initial, and whether the
    /// server took it (if not, it went again after the handshake: `send`, `wait` and
    /// `receive` are then the second sending's).
    pub early: Option<(Duration, bool)>,
    /// What a 3xx to 5xx response said.
    pub said: Option<Box<str>>,
}

fn failure(f: Failure, what: &str, conn: Option<&quinn::Connection>) -> ProbeError {
    let mut message = what.to_string();
    if let Some(d) = f.detail {
        message.push_str(&format!(" ({})", d.name()));
    }
    if let Some(e) = conn.and_then(|c| c.close_reason()) {
        message.push_str(&format!(": {e}"));
    }
    ProbeError {
        key: f.key(),
        ..err(f.kind, message)
    }
}

/// Open a QUIC connection to `origin` and start HTTP/3 on it. With `early` and a
/// session to resume that allows it, returns before the handshake completes: the first
/// request then goes in 0-RTT.
pub(crate) async fn open(
    origin: &Origin,
    quic_tls: &QuicTls,
    endpoints: &Endpoints,
    timeout: Duration,
    dns: &DnsSettings,
    early: bool,
) -> Result<H3Probe, ProbeError> {
    let (addrs, dns_time) = resolve(origin, timeout, dns).await?;
    let Some(&addr) = addrs.first() else {
        return Err(err(ErrorKind::Dns, format!("{}: no address", origin.host)));
    };
    let (crypto, seen) = quic_tls.for_connection();
    let mut cfg = quinn::ClientConfig::new(crypto);
    cfg.transport_config(endpoints.transport.clone());
    let endpoint = endpoints
        .get(addr, &origin.local_addrs)
        .map_err(|e| err(classify_connect_error(&e).kind, e.to_string()))?;
    let started = Instant::now();
    let connecting = endpoint
        .connect_with(cfg, addr, &origin.host)
        .map_err(|e| err(ErrorKind::Connect, e.to_string()))?;
    let connecting = if early {
        match connecting.into_0rtt() {
            Ok((conn, accepted)) => {
                let live = Live::start(conn.clone())
                    .await
                    .map_err(|f| failure(f, "HTTP/3 in 0-RTT", Some(&conn)))?;
                return Ok(H3Probe {
                    conn,
                    live,
                    seen,
                    dns: dns_time,
                    started,
                    handshake: None,
                    h3_setup: None,
                    early_unavailable: false,
                    accepted: Some(accepted),
                });
            }
            Err(c) => c,
        }
    } else {
        connecting
    };
    let conn = match tokio::time::timeout(timeout, connecting).await {
        Err(_) => {
            return Err(err(
                ErrorKind::QuicTimeout,
                format!("no QUIC handshake with {addr} within {timeout:?}"),
            ))
        }
        Ok(Err(e)) => {
            return Err(failure(
                classify_connection(&e, false),
                &format!("QUIC handshake with {addr}: {e}"),
                None,
            ))
        }
        Ok(Ok(c)) => c,
    };
    let handshake = started.elapsed();
    let t = Instant::now();
    let live = tokio::time::timeout(timeout, Live::start(conn.clone()))
        .await
        .map_err(|_| err(ErrorKind::TimeoutSend, "HTTP/3's control stream timed out"))?
        .map_err(|f| failure(f, "starting HTTP/3", Some(&conn)))?;
    Ok(H3Probe {
        conn,
        live,
        seen,
        dns: dns_time,
        started,
        handshake: Some(handshake),
        h3_setup: Some(t.elapsed()),
        early_unavailable: early,
        accepted: None,
    })
}

impl H3Probe {
    /// What the handshake agreed on (TLS 1.3 inside QUIC).
    pub(crate) fn tls_info(&self) -> TlsInfo {
        let alpn = self
            .conn
            .handshake_data()
            .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
            .and_then(|d| d.protocol)
            .map(|p| String::from_utf8_lossy(&p).into_owned());
        TlsInfo {
            version: "TLSv1.3".into(),
            cipher_suite: String::new(),
            alpn,
            resumed: !self.seen.full(),
            key_exchange: None,
            hello_retry_request: None,
            client_hello_bytes: None,
            server_flight_bytes: None,
            client_certificate: None,
        }
    }

    pub(crate) fn quic_info(&self) -> QuicInfo {
        let s = self.conn.stats();
        QuicInfo {
            remote: self.conn.remote_address().to_string(),
            rtt_ms: s.path.rtt.as_secs_f64() * 1000.0,
            packets_sent: s.path.sent_packets,
            packets_lost: s.path.lost_packets,
            datagrams_sent: s.udp_tx.datagrams,
            datagrams_received: s.udp_rx.datagrams,
            bytes_sent: s.udp_tx.bytes,
            bytes_received: s.udp_rx.bytes,
        }
    }

    /// Open for another request.
    pub(crate) fn usable(&self) -> bool {
        self.conn.close_reason().is_none()
    }

    /// Send `target`'s request on a new stream and read the response. The first
    /// exchange on a 0-RTT connection goes in early data; rejected, it goes again once
    /// the handshake is done, on a new HTTP/3 session (the first one's streams are gone).
    pub(crate) async fn exchange(
        &mut self,
        target: &Target,
        timeout: Duration,
    ) -> Result<H3Exchange, ProbeError> {
        let Some(accepted) = self.accepted.take() else {
            return self.one(target, timeout, None).await;
        };
        let left = self.started.elapsed();
        let by = tokio::time::Instant::now() + timeout;
        let mut phases = Phases::default();
        let (phase, got) = (Cell::new(Phase::Send), Cell::new(0));
        let mut accepted = std::pin::pin!(accepted);
        let ex = exchange(
            &mut self.live.send,
            target.stream_request(),
            &mut phases,
            (&phase, &got),
            None,
            Taken::default(),
        );
        let raced = tokio::time::timeout_at(by, race_verdict(ex, &mut accepted)).await;
        let Ok((outcome, verdict)) = raced else {
            return Err(self.timed_out(phase.get(), timeout));
        };
        let verdict = match verdict {
            Some(v) => v,
            None => match tokio::time::timeout_at(by, &mut accepted).await {
                Ok(a) => (a, Instant::now()),
                Err(_) => {
                    return Err(err(
                        ErrorKind::QuicTimeout,
                        format!("the QUIC handshake did not complete within {timeout:?}"),
                    ))
                }
            },
        };
        self.handshake = Some(verdict.1.duration_since(self.started));
        if verdict.0 {
            let r = outcome.expect("an accepted 0-RTT exchange has a result");
            return self.done(r, phases, got.get(), Some((left, true)));
        }
        if let Some(e) = self.conn.close_reason() {
            return Err(failure(
                classify_connection(&e, false),
                "the connection failed during its handshake",
                None,
            ));
        }
        self.live.driver.abort();
        self.live = Live::start(self.conn.clone())
            .await
            .map_err(|f| failure(f, "starting HTTP/3", Some(&self.conn)))?;
        self.one(target, timeout, Some((left, false))).await
    }

    /// One exchange after the handshake.
    async fn one(
        &mut self,
        target: &Target,
        timeout: Duration,
        early: Option<(Duration, bool)>,
    ) -> Result<H3Exchange, ProbeError> {
        let mut phases = Phases::default();
        let (phase, got) = (Cell::new(Phase::Send), Cell::new(0));
        let r = tokio::time::timeout(
            timeout,
            exchange(
                &mut self.live.send,
                target.stream_request(),
                &mut phases,
                (&phase, &got),
                None,
                Taken::default(),
            ),
        )
        .await;
        match r {
            Err(_) => Err(self.timed_out(phase.get(), timeout)),
            Ok(r) => self.done(r, phases, got.get(), early),
        }
    }

    fn done(
        &self,
        r: Result<crate::proto::h3::client::Got, crate::proto::h3::client::Broke>,
        phases: Phases,
        got: u64,
        early: Option<(Duration, bool)>,
    ) -> Result<H3Exchange, ProbeError> {
        let d = |v: Option<u64>| Duration::from_nanos(v.unwrap_or(0));
        match r {
            Ok(g) => Ok(H3Exchange {
                stream_id: g.stream_id,
                status: g.status,
                send: d(phases[Phase::Send]),
                wait: d(phases[Phase::Wait]),
                receive: d(phases[Phase::Receive]),
                body_bytes: g.body_bytes,
                early,
                said: g.said,
            }),
            Err(b) => {
                let closed = self.conn.close_reason();
                let in_body = got > 0 || b.phase == Phase::Receive;
                let f = classify_stream(&b.error, closed.as_ref(), in_body);
                Err(failure(
                    f,
                    &format!(
                        "the request's stream failed ({}): {}",
                        phase_words(b.phase),
                        b.error
                    ),
                    Some(&self.conn),
                ))
            }
        }
    }

    fn timed_out(&self, phase: Phase, timeout: Duration) -> ProbeError {
        let kind = match phase {
            Phase::Send => ErrorKind::TimeoutSend,
            Phase::Receive => ErrorKind::TimeoutReceive,
            _ => ErrorKind::TimeoutWait,
        };
        err(
            kind,
            format!(
                "no complete response within {timeout:?} ({})",
                phase_words(phase)
            ),
        )
    }

    /// Wait up to `limit` for the server's session ticket (a server sends it after the
    /// handshake, which with 0-RTT may be after the response).
    pub(crate) async fn wait_ticket(&self, limit: Duration) -> bool {
        if !self.seen.ticket() {
            let _ = tokio::time::timeout(limit, self.seen.ticket_came.notified()).await;
        }
        self.seen.ticket()
    }

    /// Wait up to `limit` for the server to end the connection: how long it took and
    /// why, or `None` if it stayed open.
    pub(crate) async fn server_ends_within(&self, limit: Duration) -> Option<(Duration, String)> {
        let t = Instant::now();
        let e = tokio::time::timeout(limit, self.conn.closed()).await.ok()?;
        Some((t.elapsed(), describe_close(&e)))
    }

    /// Close it as a client done with it does (H3_NO_ERROR).
    pub(crate) fn close(&self) {
        self.conn.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
        self.live.driver.abort();
    }
}

fn phase_words(s: Phase) -> &'static str {
    match s {
        Phase::Send => "sending",
        Phase::Receive => "reading the body",
        _ => "waiting for the response",
    }
}

/// Why a QUIC connection ended, for people.
fn describe_close(e: &quinn::ConnectionError) -> String {
    match e {
        quinn::ConnectionError::ApplicationClosed(a)
            if u64::from(a.error_code) == u64::from(H3_NO_ERROR) =>
        {
            "closed by the server (H3_NO_ERROR)".into()
        }
        quinn::ConnectionError::TimedOut => "ended by QUIC's idle timeout".into(),
        e => format!("ended: {e}"),
    }
}
