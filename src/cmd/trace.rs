//! `handshake trace`: one request (or `--count N` over one connection) laid bare, in the
//! spirit of `curl -w` and httpstat: each phase, a waterfall, the TLS details, the
//! response's connection headers, and whether the connection stayed open.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cli::TraceArgs;
use crate::cmd::{current_thread_runtime, on_client, single_target, single_url_scenario};
use crate::config::{self, UsageError};
use crate::fmt::ms as fmt_ms;
use crate::plan::Scenario;
use crate::probe::{self, TlsInfo};

/// How long to watch an idle connection after the last response for the server's close.
const WATCH_AFTER: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, Serialize)]
pub struct TraceStep {
    pub index: u64,
    /// The request went out on a connection opened for an earlier one.
    pub reused: bool,
    pub dns_ms: Option<f64>,
    pub connect_ms: Option<f64>,
    pub tls_ms: Option<f64>,
    /// HTTP/2: the preface sent to the server's SETTINGS received (new connections).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h2_setup_ms: Option<f64>,
    /// HTTP/2 and HTTP/3: the stream that carried the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_id: Option<u64>,
    /// HTTP/3 (new connections): the first Initial sent to the QUIC handshake's end
    /// (transport and TLS together; `connect_ms` and `tls_ms` are then absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quic_handshake_ms: Option<f64>,
    /// HTTP/3 (new connections, not 0-RTT): after the handshake, HTTP/3's control
    /// stream opened and its SETTINGS sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h3_setup_ms: Option<f64>,
    /// 0-RTT over QUIC: the request left this long after the first Initial, before
    /// the handshake's end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_left_ms: Option<f64>,
    /// HTTP/3: quinn's figures for the connection after this response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::probe::h3::QuicInfo>,
    /// HTTP/3 with session resumption: the server's session ticket came on this
    /// connection before it was closed (the next connection can resume).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_ticket: Option<bool>,
    /// TLS 1.3 early data: the request went with the ClientHello, and the server
    /// `accepted` it or `rejected` it (then it was sent again after the handshake);
    /// over QUIC, `unavailable` when 0-RTT was asked for but no session to resume
    /// allowed it (none yet, or the server's tickets allow no early data).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_data: Option<&'static str>,
    pub send_ms: f64,
    pub wait_ms: f64,
    pub receive_ms: f64,
    pub total_ms: f64,
    pub tls: Option<TlsInfo>,
    pub status: u16,
    pub http_version: String,
    pub connection_header: Option<String>,
    pub keep_alive_header: Option<String>,
    pub body_bytes: u64,
    /// The response lets the connection persist (by its version, headers and framing).
    pub persistent: bool,
    /// What was seen after the response: "open", or "closed by the server after N ms".
    pub after_response: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceReport {
    pub schema_version: u32,
    pub tool: &'static str,
    pub version: &'static str,
    pub url: String,
    pub strategy: String,
    /// The protocol on the wire: `http/1.1`, `http/1.0`, `h2`, `h3`.
    pub protocol: String,
    /// HTTP/2: the server's SETTINGS (from the first connection).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h2_settings: Option<crate::proto::h2::wire::ServerSettings>,
    /// With `--rtt`: the emulated link to the embedded server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<crate::report::link::LinkReport>,
    pub steps: Vec<TraceStep>,
    /// A step that failed: its category and message.
    pub error: Option<String>,
}

impl TraceReport {
    fn new(
        sc: &Scenario,
        steps: Vec<TraceStep>,
        error: Option<String>,
        h2_settings: Option<crate::proto::h2::wire::ServerSettings>,
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

/// The waterfall and details, as text.
pub fn render(t: &TraceReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "trace {}  (strategy {}, {})",
        t.url, t.strategy, t.protocol
    );
    if let Some(st) = &t.h2_settings {
        let show = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
        let _ = writeln!(
            out,
            "server SETTINGS: max concurrent streams {}, initial window {}, max frame {}, header table {}",
            show(st.max_concurrent_streams),
            show(st.initial_window_size),
            show(st.max_frame_size),
            show(st.header_table_size)
        );
    }
    if let Some(l) = &t.link {
        let _ = writeln!(out, "link: {}", l.describe());
    }
    for s in &t.steps {
        let _ = writeln!(
            out,
            "\nRequest {} of {}, {} connection{}",
            s.index,
            t.steps.len(),
            if s.reused { "reused" } else { "new" },
            s.stream_id
                .map(|id| format!(", stream {id}"))
                .unwrap_or_default()
        );
        // Each phase with where its bar starts (None: where the one before it ended).
        // With 0-RTT the request leaves during the QUIC handshake: its bars overlap.
        let mut phases: Vec<(&str, Option<f64>, Option<f64>)> = vec![("dns", s.dns_ms, None)];
        if s.quic.is_some() {
            let from = s.dns_ms.unwrap_or(0.0);
            phases.push(("quic_hs", s.quic_handshake_ms, None));
            if let Some(left) = s.request_left_ms {
                phases.push(("send", Some(s.send_ms), Some(from + left)));
            } else {
                phases.push(("h3_setup", s.h3_setup_ms, None));
                phases.push(("send", Some(s.send_ms), None));
            }
        } else {
            phases.push(("connect", s.connect_ms, None));
            phases.push(("tls", s.tls_ms, None));
            if s.stream_id.is_some() {
                phases.push(("h2_setup", s.h2_setup_ms, None));
            }
            phases.push(("send", Some(s.send_ms), None));
        }
        phases.extend([
            ("wait", Some(s.wait_ms), None),
            ("receive", Some(s.receive_ms), None),
        ]);
        let width = 50.0;
        let scale = if s.total_ms > 0.0 {
            width / s.total_ms
        } else {
            0.0
        };
        let mut at = 0.0;
        for (name, v, from) in phases {
            match v {
                None => {
                    let _ = writeln!(out, "  {name:<8} {:>10}", "-");
                }
                Some(v) => {
                    if let Some(f) = from {
                        at = f;
                    }
                    let pad = ((at * scale).round() as usize).min(width as usize);
                    let len = ((v * scale).round() as usize).max(1);
                    let _ = writeln!(
                        out,
                        "  {name:<8} {:>10} |{}{}",
                        format!("{} ms", fmt_ms(v)),
                        " ".repeat(pad),
                        "█".repeat(len)
                    );
                    at += v;
                }
            }
        }
        let _ = writeln!(
            out,
            "  {:<8} {:>10}",
            "total",
            format!("{} ms", fmt_ms(s.total_ms))
        );
        if let Some(tls) = &s.tls {
            let _ = writeln!(
                out,
                "  TLS         {}{}, ALPN {}, {} handshake{}",
                tls.version,
                if s.quic.is_some() {
                    " inside QUIC".to_string()
                } else {
                    format!(" {}", tls.cipher_suite)
                },
                tls.alpn.as_deref().unwrap_or("none"),
                if tls.resumed { "resumed" } else { "full" },
                match s.early_data {
                    Some("accepted") => "; the request went in early data (0-RTT), accepted: it was on its way during the handshake",
                    Some("rejected") => "; the request went in early data (0-RTT), rejected: sent again after the handshake",
                    Some(_) => "; no 0-RTT: no session to resume allows early data (none yet, or the server's tickets allow none)",
                    None => "",
                }
            );
        }
        if let (Some(left), Some(hs)) = (s.request_left_ms, s.quic_handshake_ms) {
            let _ = writeln!(
                out,
                "  0-RTT       the request left {} ms after the first Initial, {} ms before the handshake's end",
                fmt_ms(left),
                fmt_ms((hs - left).max(0.0))
            );
        }
        if let Some(q) = &s.quic {
            let _ = writeln!(
                out,
                "  QUIC        {}, RTT estimate {} ms, {} packets sent ({} lost), {} datagrams sent, {} received",
                q.remote,
                fmt_ms(q.rtt_ms),
                q.packets_sent,
                q.packets_lost,
                q.datagrams_sent,
                q.datagrams_received
            );
        }
        if let Some(t) = s.session_ticket {
            let _ = writeln!(
                out,
                "  Ticket      {}",
                if t {
                    "the server sent a session ticket: the next connection can resume"
                } else {
                    "no session ticket came before the close: the next connection cannot resume"
                }
            );
        }
        if s.stream_id.is_some() {
            let _ = writeln!(
                out,
                "  Response    {} {}, {} body bytes",
                s.http_version, s.status, s.body_bytes
            );
            let _ = writeln!(out, "  Connection  {}", s.after_response);
        } else {
            let _ = writeln!(
                out,
                "  Response    {} {}, {} body bytes; Connection: {}; Keep-Alive: {}",
                s.http_version,
                s.status,
                s.body_bytes,
                s.connection_header.as_deref().unwrap_or("-"),
                s.keep_alive_header.as_deref().unwrap_or("-")
            );
            let _ = writeln!(
                out,
                "  Connection  {} by the response; after it: {}",
                if s.persistent { "may persist" } else { "ends" },
                s.after_response
            );
        }
    }
    if let Some(e) = &t.error {
        let _ = writeln!(out, "\nFailed: {e}");
    }
    out
}

pub fn run(a: TraceArgs) -> anyhow::Result<i32> {
    if a.count == 0 || a.count > 100_000 {
        return Err(UsageError("--count must be between 1 and 100000".into()).into());
    }
    let strategy = if a.http2 {
        crate::plan::Strategy::H2
    } else if a.http3 {
        crate::plan::Strategy::H3
    } else {
        config::parse_strategy("--strategy", &a.strategy)?
    };
    let (url, roots, embedded) = single_target(
        a.url.as_deref(),
        &a.link,
        &a.request,
        a.embedded_tls || strategy.needs_tls(),
        strategy.early_data(),
    )?;
    let sc = single_url_scenario(&a.request, &url, roots, strategy, a.count, &a.timeout)?;
    let run = || -> anyhow::Result<TraceReport> {
        let rt = current_thread_runtime()?;
        Ok(if strategy.quic() {
            let local = tokio::task::LocalSet::new();
            rt.block_on(local.run_until(execute_h3(&sc, a.count)))
        } else if strategy.multiplexed() {
            let local = tokio::task::LocalSet::new();
            rt.block_on(local.run_until(execute_h2(&sc, a.count)))
        } else {
            rt.block_on(execute(&sc, a.count))
        })
    };
    let mut t = on_client(embedded.as_ref(), run)??;
    if let Some(e) = embedded {
        t.link = e.finish().1;
    }
    let out = if a.json {
        serde_json::to_string_pretty(&t).expect("trace serializes")
    } else {
        render(&t)
    };
    println!("{out}");
    Ok(if t.error.is_some() { 1 } else { 0 })
}
