//! One probe connection, whatever its protocol: `trace` and `doctor` open it, send
//! requests on it one at a time and watch for its end through this one interface; the
//! protocol's own work is in `probe` (HTTP/1), `probe::h2` and `probe::h3`.

use std::rc::Rc;
use std::time::Duration;

use super::h2::H2Probe;
use super::h3::{H3Probe, QuicInfo};
use super::{err, exchange, open, server_closes_within, Opened, ProbeError, TlsInfo};
use crate::plan::{Scenario, Target};
use crate::proto::h3::client::Endpoints;
use crate::record::ErrorKind;
use crate::strategy::Strategy;

/// What opening the connection cost: the phases its protocol has.
#[derive(Debug, Clone, Default)]
pub(crate) struct Setup {
    pub dns: Option<Duration>,
    /// The TCP connect, to the proxy when `proxied`.
    pub connect: Option<Duration>,
    pub proxied: bool,
    /// Through a proxy to an https:// origin: the `CONNECT` round trip.
    pub tunnel: Option<Duration>,
    pub tls: Option<Duration>,
    /// HTTP/2: the preface sent to the server's SETTINGS received.
    pub h2_setup: Option<Duration>,
    /// HTTP/3: the QUIC handshake, and HTTP/3's start after it.
    pub quic_handshake: Option<Duration>,
    pub h3_setup: Option<Duration>,
    pub tls_info: Option<TlsInfo>,
}

/// One request and its response, whatever the protocol.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub status: u16,
    pub version: &'static str,
    /// HTTP/1 only: the response's headers.
    pub headers: Vec<(String, String)>,
    /// HTTP/2 and HTTP/3: the request's stream.
    pub stream_id: Option<u64>,
    pub send: Duration,
    pub wait: Duration,
    pub receive: Duration,
    pub body_bytes: u64,
    /// The connection can carry another request after this one: HTTP/1 by the
    /// response's headers and framing, HTTP/2 and HTTP/3 while no GOAWAY or close came.
    pub persistent: bool,
    /// The request went in TLS early data: "accepted" or "rejected" by the server, or
    /// "unavailable" (asked for, but no session allowed it).
    pub early_data: Option<&'static str>,
    /// HTTP/3 0-RTT taken: how long after the first Initial the request had left.
    pub request_left: Option<Duration>,
    /// What a 3xx to 5xx response said.
    pub said: Option<Box<str>>,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        super::header(&self.headers, name)
    }
}

/// An open probe connection.
pub(crate) enum Probe {
    H1 {
        opened: Box<Opened>,
        /// The last response let the connection persist (none yet: true).
        open: bool,
    },
    H2(Rc<H2Probe>),
    H3 {
        conn: Box<H3Probe>,
        /// A request has been sent on it.
        used: bool,
    },
}

impl Probe {
    /// Open a connection to the scenario's first origin, in its strategy's protocol
    /// (HTTP/2 and HTTP/3 run inside a `LocalSet`). `endpoints` carry HTTP/3's UDP
    /// sockets and session cache from one connection to the next.
    pub(crate) async fn open(sc: &Scenario, endpoints: &Endpoints) -> Result<Probe, ProbeError> {
        let origin = &sc.origins[sc.targets[0].origin];
        match sc.strategy {
            s if s.quic() => {
                let quic_tls = sc.quic_tls.as_ref().expect("h3 scenarios carry QUIC TLS");
                let early = sc.strategy.early_data();
                let c = super::h3::open(origin, quic_tls, endpoints, sc.timeout, &sc.dns, early)
                    .await?;
                Ok(Probe::H3 {
                    conn: Box::new(c),
                    used: false,
                })
            }
            Strategy::H2 => {
                let c = super::h2::open(origin, sc.tls.as_ref(), sc.timeout, &sc.dns).await?;
                Ok(Probe::H2(Rc::new(c)))
            }
            _ => {
                let o = open(origin, sc.tls.as_ref(), sc.timeout, &sc.dns).await?;
                Ok(Probe::H1 {
                    opened: Box::new(o),
                    open: true,
                })
            }
        }
    }

    /// What opening it cost (with early data, complete once the first answer came).
    pub(crate) fn setup(&self) -> Setup {
        match self {
            Probe::H1 { opened: o, .. } => Setup {
                dns: o.dns,
                connect: Some(o.connect),
                proxied: o.proxied,
                tunnel: o.tunnel,
                tls: o.tls,
                tls_info: o.tls_info.clone(),
                ..Setup::default()
            },
            Probe::H2(c) => Setup {
                dns: c.dns,
                connect: Some(c.connect),
                proxied: c.proxied,
                tunnel: c.tunnel,
                tls: c.tls,
                h2_setup: Some(c.h2_setup),
                tls_info: c.tls_info.clone(),
                ..Setup::default()
            },
            Probe::H3 { conn: c, .. } => Setup {
                dns: c.dns,
                quic_handshake: c.handshake,
                h3_setup: c.h3_setup,
                tls_info: Some(c.tls_info()),
                ..Setup::default()
            },
        }
    }

    /// Open for another request.
    pub(crate) fn usable(&self) -> bool {
        match self {
            Probe::H1 { open, .. } => *open,
            Probe::H2(c) => c.usable(),
            Probe::H3 { conn, .. } => conn.usable(),
        }
    }

    /// HTTP/3: quinn's figures for the connection so far.
    pub(crate) fn quic_info(&self) -> Option<QuicInfo> {
        match self {
            Probe::H3 { conn, .. } => Some(conn.quic_info()),
            _ => None,
        }
    }

    /// Send `target`'s request and read the whole response.
    pub(crate) async fn exchange(
        &mut self,
        target: &Target,
        timeout: Duration,
    ) -> Result<Answer, ProbeError> {
        match self {
            Probe::H1 { opened, open } => {
                let first = opened.conn.requests == 0;
                let head = target.template.is_head();
                let ex = exchange(&mut opened.conn, &target.request, head, timeout).await;
                let ex = ex.inspect_err(|_| *open = false)?;
                *open = ex.persistent;
                let mut a = Answer {
                    status: ex.status,
                    version: ex.version,
                    headers: ex.headers,
                    stream_id: None,
                    send: ex.send,
                    wait: ex.wait,
                    receive: ex.receive,
                    body_bytes: ex.body_bytes,
                    persistent: ex.persistent,
                    early_data: None,
                    request_left: None,
                    said: ex.said,
                };
                // Early data: the request's write was the first flight; its flush was
                // the handshake. The handshake is `tls`, the write `send` (about nothing).
                if opened.early && first {
                    opened.tls = Some(a.send);
                    a.send = Duration::ZERO;
                    let wire = opened.conn.stream.take_wire();
                    if let Some(session) = opened.conn.stream.tls_session() {
                        opened.tls_info = Some(TlsInfo::of(session, wire));
                        a.early_data = Some(if session.is_early_data_accepted() {
                            "accepted"
                        } else {
                            "rejected"
                        });
                    }
                }
                Ok(a)
            }
            Probe::H2(c) => {
                let head = target.h2_request.as_ref().ok_or_else(|| {
                    err(
                        ErrorKind::Protocol,
                        "no HTTP/2 request head for this target",
                    )
                })?;
                let ex = c
                    .exchange((head, target.template.body.as_deref()), timeout)
                    .await?;
                Ok(Answer {
                    status: ex.status,
                    version: "HTTP/2",
                    headers: Vec::new(),
                    stream_id: Some(u64::from(ex.stream_id)),
                    send: ex.send,
                    wait: ex.wait,
                    receive: ex.receive,
                    body_bytes: ex.body_bytes,
                    persistent: c.usable(),
                    early_data: None,
                    request_left: None,
                    said: ex.said,
                })
            }
            Probe::H3 { conn: c, used } => {
                let first = !std::mem::replace(used, true);
                let ex = c.exchange(target, timeout).await?;
                let (request_left, early_data) = match ex.early {
                    Some((left, taken)) => (
                        taken.then_some(left),
                        Some(if taken { "accepted" } else { "rejected" }),
                    ),
                    None if first && c.early_unavailable => (None, Some("unavailable")),
                    None => (None, None),
                };
                Ok(Answer {
                    status: ex.status,
                    version: "HTTP/3",
                    headers: Vec::new(),
                    stream_id: Some(ex.stream_id),
                    send: ex.send,
                    wait: ex.wait,
                    receive: ex.receive,
                    body_bytes: ex.body_bytes,
                    persistent: c.usable(),
                    early_data,
                    request_left,
                    said: ex.said,
                })
            }
        }
    }

    /// Wait up to `limit` for the server to end the connection while idle: how long
    /// it took and how it ended ("closed by the server", a GOAWAY, QUIC's close), or
    /// `None` if it stayed open.
    pub(crate) async fn server_ends_within(
        &mut self,
        limit: Duration,
    ) -> Option<(Duration, String)> {
        match self {
            Probe::H1 { opened, open, .. } => {
                let t = server_closes_within(&mut opened.conn, limit).await?;
                *open = false;
                Some((t, "closed by the server".to_string()))
            }
            Probe::H2(c) => {
                let t = c.server_ends_within(limit).await?;
                let why = c
                    .describe_goaway()
                    .unwrap_or_else(|| "closed by the server".into());
                Some((t, why))
            }
            Probe::H3 { conn, .. } => conn.server_ends_within(limit).await,
        }
    }

    /// HTTP/2: the GOAWAY that ended the connection for new streams, as words.
    pub(crate) fn goaway(&self) -> Option<String> {
        match self {
            Probe::H2(c) => c.describe_goaway(),
            _ => None,
        }
    }

    /// HTTP/2: the shared connection (streams may run on it at once).
    pub(crate) fn h2(&self) -> Option<Rc<H2Probe>> {
        match self {
            Probe::H2(c) => Some(c.clone()),
            _ => None,
        }
    }

    /// HTTP/3: close it as a client done with it does (H3_NO_ERROR), once the
    /// server's session ticket has come when `wait_ticket` asks for it: whether it
    /// came.
    pub(crate) async fn close(&self, wait_ticket: bool) -> Option<bool> {
        let Probe::H3 { conn: c, .. } = self else {
            return None;
        };
        let mut ticket = None;
        if wait_ticket {
            let rtt_ms = c.quic_info().rtt_ms;
            let wait = Duration::from_secs_f64(rtt_ms * 3.0 / 1000.0) + Duration::from_millis(10);
            ticket = Some(c.wait_ticket(wait.min(Duration::from_secs(1))).await);
        }
        c.close();
        ticket
    }
}
