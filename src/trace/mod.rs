//! The trace: one request (or `--count N` over one connection) laid bare, in the
//! spirit of `curl -w` and httpstat: each phase, a waterfall, the TLS details, the
//! response's connection headers, and whether the connection stayed open.

use std::time::{Duration, Instant};

pub(crate) mod findings;

use crate::fmt::ms as fmt_ms;
use crate::net::client_auth::AskedCounts;
use crate::plan::Scenario;
use crate::probe::any::{Answer, Probe, Setup};
use crate::report::trace::TlsInfo;
pub(crate) use crate::report::trace::{TraceReport, TraceStep};

/// How long to watch an idle connection after the last response for the server's close.
const WATCH_AFTER: Duration = Duration::from_millis(200);

impl TraceReport {
    pub(crate) fn new(
        sc: &Scenario,
        steps: Vec<TraceStep>,
        error: Option<String>,
        h2_settings: Option<crate::record::ServerSettings>,
    ) -> TraceReport {
        let mut status_examples = std::collections::BTreeMap::new();
        for s in &steps {
            if let Some(m) = &s.said {
                status_examples
                    .entry(s.status.to_string())
                    .or_insert_with(|| m.to_string());
            }
        }
        let (mut headline, mut findings) =
            findings::judge(sc.strategy, &steps, &status_examples, error.is_some());
        // Through a forward proxy in plain HTTP the connections are to the proxy: what a
        // reuse finding says of "the server" is the proxy's answer to this client.
        let o = &sc.origins[0];
        if let (Some(p), false) = (&o.proxy, o.tunneled()) {
            let proxy = p.display();
            let url = &sc.targets[0].url;
            for f in headline.iter_mut().chain(findings.iter_mut()) {
                if f.cause == crate::report::finding::Cause::Reuse {
                    f.text = crate::report::cause::through_forward_proxy(&f.text, &proxy, url);
                }
            }
        }
        TraceReport {
            schema_version: crate::report::SCHEMA_VERSION,
            tool: "handshake",
            version: env!("CARGO_PKG_VERSION"),
            url: sc.targets[0].url.clone(),
            strategy: sc.strategy.name().to_string(),
            protocol: sc.strategy.protocol().to_string(),
            h2_settings,
            link: None,
            headline,
            findings,
            status_examples,
            steps,
            error,
        }
    }
}

/// "request 1: connect: Connection refused (refused). Hint: nothing accepts
/// connections at 127.0.0.1:1: ...": the failure, and what to do about it where it is a
/// common mistake.
fn failed(
    index: u64,
    sc: &Scenario,
    proxy: Option<&str>,
    e: &crate::probe::ProbeError,
    before: &AskedCounts,
) -> String {
    // One origin: a probe's connections go to its hop.
    let route = crate::report::failure::Route {
        proxy,
        hop: sc.origins[0].hop.as_deref(),
    };
    let mut line = format!("request {index}: {e}");
    // A server that requires a client certificate ends the connection after the
    // handshake, with an alert or without a word: that it asked says more than how it
    // ended.
    let hint = if no_certificate(sc, before) {
        Some(crate::report::failure::NO_CLIENT_CERTIFICATE.to_string())
    } else {
        crate::report::failure::hint(&sc.targets[0].url, route, e.key, &e.message)
    };
    if let Some(h) = hint {
        line.push_str(&format!(". Hint: {h}"));
    }
    line
}

/// Since `before`, the server asked for a client certificate and none was sent.
fn no_certificate(sc: &Scenario, before: &AskedCounts) -> bool {
    let now = sc.client_auth.asked.counts();
    now.requested > before.requested && now.presented == before.presented
}

/// A step's TLS with what the server asked of a client certificate since `before` (one
/// connection opens at a time: the count's growth is this connection's).
fn with_client_certificate(mut t: TlsInfo, sc: &Scenario, before: &AskedCounts) -> TlsInfo {
    let now = sc.client_auth.asked.counts();
    if now.requested > before.requested {
        t.client_certificate = Some(crate::report::trace::StepClientCertificate {
            presented: now.presented > before.presented,
            acceptable_cas: now.cas,
        });
    }
    t
}

/// The server had closed the connection after `prev`'s response without a word: the
/// step says so, and that request `index` went again on a new connection.
fn closed_silently(prev: Option<&mut TraceStep>, index: u64, e: &crate::probe::ProbeError) {
    if let Some(prev) = prev {
        prev.closed_silently = true;
        prev.after_response = format!(
            "closed by the server without a word (no `Connection: close`): request {index} found it closed ({}) and went again on a new connection",
            e.key
        );
    }
}

/// A reused HTTP/1 connection that failed before any response byte: the server had
/// closed it (a FIN or a reset on the idle connection).
fn stale(e: &crate::probe::ProbeError) -> bool {
    use crate::record::ErrorKind;
    matches!(e.kind, ErrorKind::ClosedBeforeResponse | ErrorKind::Reset)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Run the trace: `count` requests in a row, reusing the connection when the strategy
/// and the server allow (HTTP/2 and HTTP/3: on the streams of one connection, a new one
/// when the server ends it; `h3-close`, `h3-resumed`, `h3-0rtt`: each on a new
/// connection). The connection's setup is on the step that opened it. HTTP/2 and
/// HTTP/3 run in a `LocalSet`.
pub(crate) async fn execute(sc: &Scenario, count: u64) -> TraceReport {
    let target = &sc.targets[0];
    let proxy = sc.origins[0].proxy.as_ref().map(|p| p.display());
    let fail = |index, e: &_, before: &_| failed(index, sc, proxy.as_deref(), e, before);
    let endpoints = crate::proto::h3::client::Endpoints::new();
    let mut steps: Vec<TraceStep> = Vec::new();
    let mut error = None;
    let mut settings = None;
    let mut conn: Option<Probe> = None;
    let mut index = 0;
    let mut went_again = false;
    let h1 = !sc.strategy.multiplexed() && !sc.strategy.quic();
    while index < count || went_again {
        if !went_again {
            index += 1;
        }
        let start = Instant::now();
        let asked_before = sc.client_auth.asked.counts();
        conn = conn.filter(Probe::usable);
        let reused = conn.is_some();
        if conn.is_none() {
            match Probe::open(sc, &endpoints).await {
                Ok(c) => {
                    if let Some(h2) = c.h2() {
                        settings.get_or_insert(h2.settings);
                    }
                    conn = Some(c);
                }
                Err(e) => {
                    error = Some(fail(index, &e, &asked_before));
                    break;
                }
            }
        }
        let c = conn.as_mut().expect("connection");
        let answer = match c.exchange(target, sc.timeout).await {
            Ok(a) => {
                went_again = false;
                a
            }
            Err(e) if reused && !went_again && h1 && stale(&e) => {
                // As a client does, the request goes again, once, on a new connection.
                closed_silently(steps.last_mut(), index, &e);
                conn = None;
                went_again = true;
                continue;
            }
            Err(e) => {
                error = Some(fail(index, &e, &asked_before));
                break;
            }
        };
        let total = start.elapsed();
        let quic = c.quic_info();
        let (after, session_ticket) = after_response(sc, c, &answer, index == count).await;
        let setup = if reused { Setup::default() } else { c.setup() };
        steps.push(TraceStep {
            index,
            reused,
            dns_ms: setup.dns.map(ms),
            connect_ms: setup.connect.filter(|_| !setup.proxied).map(ms),
            proxy_connect_ms: setup.connect.filter(|_| setup.proxied).map(ms),
            tunnel_ms: setup.tunnel.map(ms),
            tls_ms: setup.tls.map(ms),
            h2_setup_ms: setup.h2_setup.map(ms),
            stream_id: answer.stream_id,
            quic_handshake_ms: setup.quic_handshake.map(ms),
            h3_setup_ms: setup.h3_setup.map(ms),
            request_left_ms: answer.request_left.map(ms),
            quic,
            session_ticket,
            early_data: answer.early_data,
            send_ms: ms(answer.send),
            wait_ms: ms(answer.wait),
            receive_ms: ms(answer.receive),
            total_ms: ms(total),
            tls: setup
                .tls_info
                .map(|t| with_client_certificate(t, sc, &asked_before)),
            status: answer.status,
            http_version: answer.version.to_string(),
            connection_header: answer.header("connection").map(String::from),
            keep_alive_header: answer.header("keep-alive").map(String::from),
            body_bytes: answer.body_bytes,
            persistent: answer.persistent
                && (answer.stream_id.is_none() || sc.strategy.persistent()),
            after_response: after,
            closed_silently: false,
            said: answer.said.clone(),
        });
        if !sc.strategy.persistent() {
            conn = None;
        }
    }
    if let Some(c) = conn {
        c.close(false).await;
    }
    endpoints.close_all().await;
    TraceReport::new(sc, steps, error, settings)
}

/// What became of the connection after the response: watched for the server's close
/// after the last request (and, over HTTP/1, whenever it is not to be reused), closed
/// by the client after each request when the strategy says so over HTTP/3 (once the
/// session ticket has come, when the next connection resumes: whether it came).
async fn after_response(
    sc: &Scenario,
    c: &mut Probe,
    answer: &Answer,
    last: bool,
) -> (String, Option<bool>) {
    let h1 = answer.stream_id.is_none();
    let persistent = sc.strategy.persistent();
    if !h1 && !persistent {
        // HTTP/3, one request per connection.
        let ticket = c.close(sc.strategy.tls_resumption()).await;
        let said = "closed by the client (H3_NO_ERROR): one request per connection";
        return (said.to_string(), ticket);
    }
    let said_close = h1 && (!answer.persistent || !persistent);
    let said = if last || said_close {
        // Over HTTP/1 a close the server announced is waited for as long as any answer.
        let announced = h1 && !answer.persistent;
        let limit = if announced { sc.timeout } else { WATCH_AFTER };
        match c.server_ends_within(limit).await {
            Some((t, why)) => format!("{why} {} ms after the response", fmt_ms(ms(t))),
            None if !announced => {
                format!("open ({} ms later, still open)", WATCH_AFTER.as_millis())
            }
            None => "the server did not close it; the client closed it".to_string(),
        }
    } else if h1 {
        "open: reused by the next request".to_string()
    } else if let Some(g) = c.goaway() {
        format!("{g}: the next request opens a new connection")
    } else if c.usable() {
        "open: the next request takes a new stream on it".to_string()
    } else {
        "ended by the server: the next request opens a new connection".to_string()
    };
    (said, None)
}
