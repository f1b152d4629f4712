//! The trace: one request (or `--count N` over one connection) laid bare, in the
//! spirit of `curl -w` and httpstat: each phase, a waterfall, the TLS details, the
//! response's connection headers, and whether the connection stayed open.

use std::time::{Duration, Instant};

use crate::fmt::ms as fmt_ms;
use crate::plan::Scenario;
use crate::probe::{self, TlsInfo};
pub use crate::report::trace::{TraceReport, TraceStep};

/// How long to watch an idle connection after the last response for the server's close.
const WATCH_AFTER: Duration = Duration::from_millis(200);

impl TraceReport {
    pub fn new(
        sc: &Scenario,
        steps: Vec<TraceStep>,
        error: Option<String>,
        h2_settings: Option<crate::record::ServerSettings>,
    ) -> TraceReport {
        TraceReport {
            schema_version: crate::report::SCHEMA_VERSION,
            tool: "handshake",
            version: env!("CARGO_PKG_VERSION"),
            url: sc.targets[0].url.clone(),
            strategy: sc.strategy.name().to_string(),
            protocol: sc.strategy.protocol().to_string(),
            h2_settings,
            link: None,
            steps,
            error,
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Run the trace: `count` requests in a row, reusing the connection when it may be.
pub async fn execute(sc: &Scenario, count: u64) -> TraceReport {
    let target = &sc.targets[0];
    let origin = &sc.origins[target.origin];
    let mut steps = Vec::new();
    let mut error = None;
    let mut conn: Option<probe::Opened> = None;
    for index in 1..=count {
        let start = Instant::now();
        let reused = conn.is_some();
        if conn.is_none() {
            match probe::open(origin, sc.tls.as_ref(), sc.timeout, &sc.dns).await {
                Ok(o) => conn = Some(o),
                Err(e) => {
                    error = Some(format!("request {index}: {e}"));
                    break;
                }
            }
        }
        let opened = conn.as_mut().expect("connection");
        let ex = match probe::exchange(
            &mut opened.conn,
            &target.request,
            target.template.is_head(),
            sc.timeout,
        )
        .await
        {
            Ok(ex) => ex,
            Err(e) => {
                error = Some(format!("request {index}: {e}"));
                break;
            }
        };
        let total = start.elapsed();
        // Early data: the request's write was the first flight; its flush was the
        // handshake. The handshake is `tls`, the write `send` (about nothing).
        let (mut tls_ms, mut send_ms, mut early_data) = (
            (!reused).then_some(opened.tls).flatten().map(ms),
            ms(ex.send),
            None,
        );
        if opened.early && !reused {
            tls_ms = Some(ms(ex.send));
            send_ms = 0.0;
            if let Some(session) = opened.conn.stream.tls_session() {
                opened.tls_info = Some(TlsInfo::of(session));
                early_data = Some(if session.is_early_data_accepted() {
                    "accepted"
                } else {
                    "rejected"
                });
            }
        }
        let last = index == count;
        let after = if !ex.persistent || !sc.strategy.persistent() || last {
            match probe::server_closes_within(
                &mut opened.conn,
                if ex.persistent {
                    WATCH_AFTER
                } else {
                    sc.timeout
                },
            )
            .await
            {
                Some(t) => format!(
                    "closed by the server {} ms after the response",
                    fmt_ms(ms(t))
                ),
                None if ex.persistent => {
                    format!("open ({} ms later, still open)", WATCH_AFTER.as_millis())
                }
                None => "the server did not close it; the client closed it".to_string(),
            }
        } else {
            "open: reused by the next request".to_string()
        };
        steps.push(TraceStep {
            index,
            reused,
            dns_ms: (!reused).then_some(opened.dns).flatten().map(ms),
            connect_ms: (!reused).then(|| ms(opened.connect)),
            tls_ms,
            h2_setup_ms: None,
            stream_id: None,
            quic_handshake_ms: None,
            h3_setup_ms: None,
            request_left_ms: None,
            quic: None,
            session_ticket: None,
            early_data,
            send_ms,
            wait_ms: ms(ex.wait),
            receive_ms: ms(ex.receive),
            total_ms: ms(total),
            tls: if reused {
                None
            } else {
                opened.tls_info.clone()
            },
            status: ex.status,
            http_version: ex.version.to_string(),
            connection_header: ex.header("connection").map(String::from),
            keep_alive_header: ex.header("keep-alive").map(String::from),
            body_bytes: ex.body_bytes,
            persistent: ex.persistent,
            after_response: after,
        });
        if !ex.persistent || !sc.strategy.persistent() {
            conn = None;
        }
    }
    TraceReport::new(sc, steps, error, None)
}

/// HTTP/2: `count` requests one after another on the streams of one connection (a new
/// one when the server ends it), each step with its stream id; the connection's setup
/// (dns, connect, tls, h2_setup) on the step that opened it. Runs in a `LocalSet`.
pub async fn execute_h2(sc: &Scenario, count: u64) -> TraceReport {
    let target = &sc.targets[0];
    let origin = &sc.origins[target.origin];
    let head = target
        .h2_request
        .clone()
        .expect("h2 scenarios carry an HTTP/2 request head");
    let mut steps = Vec::new();
    let mut error = None;
    let mut settings = None;
    let mut conn: Option<probe::h2::H2Probe> = None;
    for index in 1..=count {
        let start = Instant::now();
        if conn.as_ref().is_some_and(|c| !c.usable()) {
            conn = None;
        }
        let reused = conn.is_some();
        if conn.is_none() {
            match probe::h2::open(origin, sc.tls.as_ref(), sc.timeout, &sc.dns).await {
                Ok(c) => {
                    settings.get_or_insert(c.settings);
                    conn = Some(c);
                }
                Err(e) => {
                    error = Some(format!("request {index}: {e}"));
                    break;
                }
            }
        }
        let c = conn.as_ref().expect("connection");
        let ex = match c.exchange(&head, sc.timeout).await {
            Ok(ex) => ex,
            Err(e) => {
                error = Some(format!("request {index}: {e}"));
                break;
            }
        };
        let total = start.elapsed();
        let last = index == count;
        let after = if last {
            match c.server_ends_within(WATCH_AFTER).await {
                Some(t) => format!(
                    "{} {} ms after the response",
                    c.describe_goaway()
                        .unwrap_or_else(|| "closed by the server".into()),
                    fmt_ms(ms(t))
                ),
                None => format!("open ({} ms later, still open)", WATCH_AFTER.as_millis()),
            }
        } else if let Some(g) = c.describe_goaway() {
            format!("{g}: the next request opens a new connection")
        } else {
            "open: the next request takes a new stream on it".to_string()
        };
        steps.push(TraceStep {
            index,
            reused,
            dns_ms: (!reused).then_some(c.dns).flatten().map(ms),
            connect_ms: (!reused).then(|| ms(c.connect)),
            tls_ms: (!reused).then_some(c.tls).flatten().map(ms),
            h2_setup_ms: (!reused).then(|| ms(c.h2_setup)),
            stream_id: Some(u64::from(ex.stream_id)),
            quic_handshake_ms: None,
            h3_setup_ms: None,
            request_left_ms: None,
            quic: None,
            session_ticket: None,
            early_data: None,
            send_ms: ms(ex.send),
            wait_ms: ms(ex.wait),
            receive_ms: ms(ex.receive),
            total_ms: ms(total),
            tls: if reused { None } else { c.tls_info.clone() },
            status: ex.status,
            http_version: "HTTP/2".to_string(),
            connection_header: None,
            keep_alive_header: None,
            body_bytes: ex.body_bytes,
            persistent: c.usable(),
            after_response: after,
        });
    }
    TraceReport::new(sc, steps, error, settings)
}

/// HTTP/3: `count` requests one after another, on the streams of one QUIC connection
/// (`h3`; a new one when the server ends it) or each on a new connection (`h3-close`,
/// `h3-resumed`, `h3-0rtt`), each step with its stream id, the connection's setup
/// (dns, quic_handshake; with 0-RTT when the request left) on the step that opened it,
/// and quinn's figures after the response. Runs in a `LocalSet`.
pub async fn execute_h3(sc: &Scenario, count: u64) -> TraceReport {
    let target = &sc.targets[0];
    let origin = &sc.origins[target.origin];
    let quic_tls = sc.quic_tls.as_ref().expect("h3 scenarios carry QUIC TLS");
    let endpoints = crate::engine::h3::Endpoints::new();
    let (persistent, early) = (sc.strategy.persistent(), sc.strategy.early_data());
    let mut steps = Vec::new();
    let mut error = None;
    let mut conn: Option<probe::h3::H3Probe> = None;
    for index in 1..=count {
        let start = Instant::now();
        if conn.as_ref().is_some_and(|c| !c.usable()) {
            conn = None;
        }
        let reused = conn.is_some();
        if conn.is_none() {
            match probe::h3::open(origin, quic_tls, &endpoints, sc.timeout, &sc.dns, early).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    error = Some(format!("request {index}: {e}"));
                    break;
                }
            }
        }
        let c = conn.as_mut().expect("connection");
        let ex = match c.exchange(target, sc.timeout).await {
            Ok(ex) => ex,
            Err(e) => {
                error = Some(format!("request {index}: {e}"));
                break;
            }
        };
        let total = start.elapsed();
        let quic = c.quic_info();
        let mut session_ticket = None;
        let after = if !persistent {
            // One request per connection: the client closes it, once the server's
            // session ticket has come when the next connection is to resume.
            if sc.strategy.tls_resumption() {
                let wait =
                    Duration::from_secs_f64(quic.rtt_ms * 3.0 / 1000.0) + Duration::from_millis(10);
                session_ticket = Some(c.wait_ticket(wait.min(Duration::from_secs(1))).await);
            }
            c.close();
            "closed by the client (H3_NO_ERROR): one request per connection".to_string()
        } else if index == count {
            match c.server_ends_within(WATCH_AFTER).await {
                Some((t, why)) => format!("{why} {} ms after the response", fmt_ms(ms(t))),
                None => format!("open ({} ms later, still open)", WATCH_AFTER.as_millis()),
            }
        } else if c.usable() {
            "open: the next request takes a new stream on it".to_string()
        } else {
            "ended by the server: the next request opens a new connection".to_string()
        };
        let (request_left_ms, early_data) = match ex.early {
            Some((left, taken)) => (
                taken.then(|| ms(left)),
                Some(if taken { "accepted" } else { "rejected" }),
            ),
            None if !reused && c.early_unavailable => (None, Some("unavailable")),
            None => (None, None),
        };
        steps.push(TraceStep {
            index,
            reused,
            dns_ms: (!reused).then_some(c.dns).flatten().map(ms),
            connect_ms: None,
            tls_ms: None,
            h2_setup_ms: None,
            stream_id: Some(ex.stream_id),
            quic_handshake_ms: (!reused).then_some(c.handshake).flatten().map(ms),
            h3_setup_ms: (!reused).then_some(c.h3_setup).flatten().map(ms),
            request_left_ms,
            quic: Some(quic),
            session_ticket,
            early_data,
            send_ms: ms(ex.send),
            wait_ms: ms(ex.wait),
            receive_ms: ms(ex.receive),
            total_ms: ms(total),
            tls: (!reused).then(|| c.tls_info()),
            status: ex.status,
            http_version: "HTTP/3".to_string(),
            connection_header: None,
            keep_alive_header: None,
            body_bytes: ex.body_bytes,
            persistent: persistent && c.usable(),
            after_response: after,
        });
        if !persistent {
            conn = None;
        }
    }
    if let Some(c) = conn {
        c.close();
    }
    endpoints.close_all().await;
    TraceReport::new(sc, steps, error, None)
}
