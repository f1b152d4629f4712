//! The doctor: probes a server's reuse policy and gives a verdict with advice.
//! HTTP/1.1 persistence, HTTP/1.0 with and without `Connection: keep-alive`, the most
//! requests it serves on one connection, its idle timeout (parallel probes with
//! different idle waits, narrowed down), and over TLS: version, ALPN, resumption and
//! what a full and a resumed handshake cost, and the key exchange ([`kx`]). Where the server speaks HTTP/2 (ALPN h2,
//! or `--h2c`): its SETTINGS, the streams it serves on one connection (GOAWAY after N),
//! its idle timeout, and whether it takes many concurrent streams. Over https, HTTP/3
//! (`h3`): Alt-Svc, a QUIC handshake, QUIC resumption and 0-RTT.

use std::sync::Arc;
use std::time::{Duration, Instant};

pub mod fixes;
pub mod flight;
pub mod h3;
pub mod kx;

use crate::engine::h3::Endpoints;
use crate::fmt::ms as fmt_ms;
use crate::net::tls;
use crate::plan::Scenario;
use crate::probe::any::Probe;
use crate::probe::{self, Exchange, ProbeError};
use crate::proto::h1::{ConnectionHeader, HttpVersion};

use crate::plan::build::RequestConfig;
use crate::progress::Steps;
pub use crate::report::doctor::{
    Concurrency, DoctorReport, EarlyDataFinding, H2Findings, IdleTimeout, MaxRequests,
    PersistProbe, ServerKind, TlsFindings,
};
use crate::report::finding::{Cause, Evidence, Finding};
use fixes::{fix, Setting};

/// How long to wait for a server to close a connection it said it would end.
const CLOSE_WATCH: Duration = Duration::from_secs(1);
/// A range of the idle timeout is narrow enough at this width (or 10 %).
const IDLE_RESOLUTION_S: f64 = 0.5;
/// Below this idle timeout, pools and load balancers in front commonly outlive it.
const SHORT_IDLE_S: f64 = 60.0;
/// Below this many requests per connection, the limit is worth fixing.
const LOW_MAX_REQUESTS: u64 = 100;
/// Handshakes timed for the full vs resumed cost.
const HANDSHAKE_SAMPLES: usize = 5;
/// HTTP/2: below this many concurrent streams a server throttles multiplexing clients
/// (browsers and gRPC expect ~100; nginx allows 128).
const LOW_CONCURRENT_STREAMS: u32 = 100;
/// HTTP/2: streams sent at once on one connection to see whether the server takes them.
const CONCURRENCY_PROBE: u32 = 100;

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The first request failed, so nothing about the server's policy could be probed: a
/// failed run (exit status 1), said with what to do about it where the failure is a
/// common mistake.
#[derive(Debug)]
pub struct Unreachable(pub String);

impl Unreachable {
    fn new(url: &str, why: &str, key: Option<&str>) -> Unreachable {
        let mut line = format!("the first request to {url} failed: {why}");
        if let Some(h) = key.and_then(|k| crate::report::failure::hint(url, k, why)) {
            line.push_str(&format!(". Hint: {h}"));
        }
        Unreachable(line)
    }
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// Send `request` on a fresh connection; if the response lets it persist, send it again.
async fn persist_probe(sc: &Scenario, request: &[u8]) -> (PersistProbe, Option<Exchange>) {
    let origin = &sc.origins[0];
    let head = sc.targets[0].template.is_head();
    let mut p = PersistProbe {
        status: None,
        http_version: None,
        connection_header: None,
        keep_alive_header: None,
        persistent: false,
        reused: false,
        server_closed: false,
        error: None,
        error_key: None,
        tcp_unreachable: false,
    };
    let mut opened = match probe::open(origin, sc.tls.as_ref(), sc.timeout, &sc.dns).await {
        Ok(o) => o,
        Err(e) => {
            p.tcp_unreachable = matches!(
                e.kind,
                crate::record::ErrorKind::Connect | crate::record::ErrorKind::TimeoutConnect
            );
            p.error = Some(e.to_string());
            p.error_key = Some(e.key);
            return (p, None);
        }
    };
    let ex = match probe::exchange(&mut opened.conn, request, head, sc.timeout).await {
        Ok(ex) => ex,
        Err(e) => {
            p.error = Some(e.to_string());
            p.error_key = Some(e.key);
            return (p, None);
        }
    };
    p.status = Some(ex.status);
    p.http_version = Some(ex.version.to_string());
    p.connection_header = ex.header("connection").map(String::from);
    p.keep_alive_header = ex.header("keep-alive").map(String::from);
    p.persistent = ex.persistent;
    if ex.persistent {
        p.reused = probe::exchange(&mut opened.conn, request, head, sc.timeout)
            .await
            .is_ok();
    } else {
        p.server_closed = probe::server_closes_within(&mut opened.conn, CLOSE_WATCH)
            .await
            .is_some();
    }
    (p, Some(ex))
}

/// Sequential requests on one connection until the server ends it (HTTP/1: a response
/// that does not let it persist; HTTP/2: a GOAWAY).
async fn max_requests(sc: &Scenario, limit: u64) -> Result<MaxRequests, ProbeError> {
    let t = &sc.targets[0];
    let mut c = Probe::open(sc, &Endpoints::new()).await?;
    for i in 1..=limit {
        let ended = c.exchange(t, sc.timeout).await.map(|a| !a.persistent);
        if let Some(found) = MaxRequests::after(i, ended) {
            return found;
        }
    }
    Ok(MaxRequests::none_within(limit))
}

impl MaxRequests {
    /// Request `i` on one connection ended it (`Ok(true)`), left it open, or failed:
    /// the finding, once there is one. A failure after the first means the server
    /// closed without saying so (or refused past a GOAWAY): it served `i - 1`.
    fn after(i: u64, ended: Result<bool, ProbeError>) -> Option<Result<MaxRequests, ProbeError>> {
        let limit = match ended {
            Ok(false) => return None,
            Ok(true) => i,
            Err(_) if i > 1 => i - 1,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(MaxRequests {
            limit: Some(limit),
            probed: i,
        }))
    }

    /// No limit met within `probed` requests.
    fn none_within(probed: u64) -> MaxRequests {
        MaxRequests {
            limit: None,
            probed,
        }
    }
}

/// What one idle probe saw.
enum IdleSeen {
    /// Still worked after this idle wait.
    OpenAfter(f64),
    /// Closed: by the server's FIN after this long idle, or found closed at this wait.
    ClosedAt(f64),
    Failed,
}

/// One connection: a request, then idle for `wait` (watching for the server's close,
/// or over HTTP/2 its GOAWAY), then another request.
async fn idle_probe(sc: Arc<Scenario>, wait: Duration) -> IdleSeen {
    let t = &sc.targets[0];
    let Ok(mut c) = Probe::open(&sc, &Endpoints::new()).await else {
        return IdleSeen::Failed;
    };
    match c.exchange(t, sc.timeout).await {
        Ok(a) if a.persistent => {}
        _ => return IdleSeen::Failed,
    }
    let idle_from = Instant::now();
    if let Some((closed, _)) = c.server_ends_within(wait).await {
        return IdleSeen::ClosedAt(secs(closed));
    }
    let waited = secs(idle_from.elapsed());
    match c.exchange(t, sc.timeout).await {
        Ok(_) => IdleSeen::OpenAfter(waited),
        Err(_) => IdleSeen::ClosedAt(waited),
    }
}

/// Run idle probes with these waits in parallel; fold into (at least, at most). Once a
/// close is seen, probes that would wait longer are cancelled: they cannot narrow it.
async fn idle_round(sc: &Arc<Scenario>, waits: &[f64], lo: &mut f64, hi: &mut Option<f64>) -> u64 {
    let mut set = tokio::task::JoinSet::new();
    let handles: Vec<(f64, tokio::task::AbortHandle)> = waits
        .iter()
        .map(|w| {
            (
                *w,
                set.spawn_local(idle_probe(sc.clone(), Duration::from_secs_f64(*w))),
            )
        })
        .collect();
    let mut n = 0;
    while let Some(r) = set.join_next().await {
        match r {
            Ok(IdleSeen::OpenAfter(w)) => *lo = lo.max(w),
            Ok(IdleSeen::ClosedAt(t)) => *hi = Some(hi.map_or(t, |h| h.min(t))),
            Ok(IdleSeen::Failed) | Err(_) => continue,
        }
        n += 1;
        if let Some(h) = *hi {
            for (w, handle) in &handles {
                if *w > h {
                    handle.abort();
                }
            }
        }
    }
    n
}

async fn idle_timeout(
    sc: &Arc<Scenario>,
    max_idle: Duration,
    claimed: Option<f64>,
    steps: &Steps,
) -> IdleTimeout {
    let max = secs(max_idle);
    let mut waits: Vec<f64> = std::iter::successors(Some(0.25), |w| Some(w * 2.0))
        .take_while(|w| *w < max)
        .collect();
    waits.push(max);
    let mut lo = 0.0;
    let mut hi = None;
    let mut probes = idle_round(sc, &waits, &mut lo, &mut hi).await;
    for round in 0..4 {
        let Some(h) = hi else { break };
        if h - lo <= IDLE_RESOLUTION_S.max(0.1 * h) {
            break;
        }
        if round == 0 {
            steps.say(&format!(
                "idle timeout between {} and {} s: narrowing it, at most 4 more rounds of idle waits up to {} s",
                fmt_ms(lo),
                fmt_ms(h),
                fmt_ms(h)
            ));
        }
        // Eight waits evenly inside (lo, hi).
        let step = (h - lo) / 9.0;
        let inner: Vec<f64> = (1..=8).map(|i| lo + step * f64::from(i)).collect();
        probes += idle_round(sc, &inner, &mut lo, &mut hi).await;
    }
    IdleTimeout {
        at_least_s: lo,
        at_most_s: hi,
        claimed_s: claimed,
        probes,
    }
}

/// A new connection to the target that has had one exchange, so the server's session
/// tickets (sent after the handshake) are read.
async fn primed(
    sc: &Scenario,
    cfg: &Arc<rustls::ClientConfig>,
) -> Result<probe::Opened, ProbeError> {
    let t = &sc.targets[0];
    let mut o = probe::open(&sc.origins[0], Some(cfg), sc.timeout, &sc.dns).await?;
    probe::exchange(&mut o.conn, &t.request, t.template.is_head(), sc.timeout).await?;
    Ok(o)
}

async fn tls_findings(
    sc: &Scenario,
    req: &RequestConfig,
    steps: &Steps,
) -> Result<TlsFindings, ProbeError> {
    let bad = |message: String| ProbeError {
        kind: crate::record::ErrorKind::Tls,
        key: crate::record::ErrorKind::Tls.name(),
        message,
    };
    let mk = |alpn: Vec<Vec<u8>>, resume: bool| {
        let opts = tls::TlsOptions {
            alpn,
            ..req.tls.clone()
        };
        tls::client_config(&opts, resume).map_err(|e| bad(format!("{e:#}")))
    };
    let origin = &sc.origins[0];
    // ALPN: offer h2 and http/1.1, see what the server picks (handshake only).
    let offer = mk(vec![b"h2".to_vec(), b"http/1.1".to_vec()], false)?;
    let first = probe::open(origin, Some(&offer), sc.timeout, &sc.dns).await?;
    let info = first
        .tls_info
        .clone()
        .ok_or_else(|| bad("no TLS session on an https:// URL".into()))?;
    drop(first);
    // Full handshakes, no resumption offered.
    let full_cfg = mk(vec![b"http/1.1".to_vec()], false)?;
    let mut full = Vec::new();
    let mut connects = Vec::new();
    let mut wire = None;
    for _ in 0..HANDSHAKE_SAMPLES {
        let o = probe::open(origin, Some(&full_cfg), sc.timeout, &sc.dns).await?;
        full.push(o.tls.map(secs).unwrap_or_default() * 1000.0);
        connects.push(secs(o.connect) * 1000.0);
        wire = wire.or(o
            .tls_info
            .map(|i| (i.client_hello_bytes, i.server_flight_bytes)));
    }
    // Resumption: one exchange (so session tickets are read), then new connections.
    let resume_cfg = mk(vec![b"http/1.1".to_vec()], true)?;
    let t = &sc.targets[0];
    drop(primed(sc, &resume_cfg).await?);
    let mut resumed = Vec::new();
    let mut any_resumed = false;
    for _ in 0..HANDSHAKE_SAMPLES {
        let mut o = probe::open(origin, Some(&resume_cfg), sc.timeout, &sc.dns).await?;
        if o.tls_info.as_ref().is_some_and(|i| i.resumed) {
            any_resumed = true;
            resumed.push(o.tls.map(secs).unwrap_or_default() * 1000.0);
        }
        // Read the response so any new ticket is stored for the next one.
        let _ = probe::exchange(&mut o.conn, &t.request, t.template.is_head(), sc.timeout).await;
    }
    // Early data: a connection for a ticket that may allow it, then one that uses it.
    let early_data = if any_resumed {
        let cfg = {
            let opts = tls::TlsOptions {
                alpn: vec![b"http/1.1".to_vec()],
                early_data: true,
                ..req.tls.clone()
            };
            tls::client_config(&opts, true).map_err(|e| bad(format!("{e:#}")))?
        };
        let mut prime = primed(sc, &cfg).await?;
        // Tickets may come after the response: read until the server's close.
        let _ = probe::server_closes_within(&mut prime.conn, CLOSE_WATCH / 5).await;
        drop(prime);
        let mut o = probe::open(origin, Some(&cfg), sc.timeout, &sc.dns).await?;
        let offered = o.early;
        probe::exchange(&mut o.conn, &t.request, t.template.is_head(), sc.timeout).await?;
        let accepted = offered
            && o.conn
                .stream
                .tls_session()
                .is_some_and(|s| s.is_early_data_accepted());
        Some(EarlyDataFinding { offered, accepted })
    } else {
        None
    };
    steps.advance();
    steps.say(&format!(
        "TLS key exchange: {} groups one at a time, then two offers of several",
        tls::groups().len()
    ));
    let key_exchange = kx::probe(sc, req).await;
    Ok(TlsFindings {
        version: info.version,
        cipher_suite: info.cipher_suite,
        offers_h2: info.alpn.as_deref() == Some("h2"),
        alpn_selected: info.alpn,
        resumption: any_resumed,
        full_handshake_ms: median(&full),
        resumed_handshake_ms: any_resumed.then(|| median(&resumed)),
        early_data,
        client_hello_bytes: wire.and_then(|w| w.0),
        server_flight_bytes: wire.and_then(|w| w.1),
        connect_ms: median(&connects),
        key_exchange,
    })
}

/// The median of samples: one handshake delayed by the scheduler says nothing about the
/// server.
fn median(v: &[f64]) -> f64 {
    crate::report::comparison::Spread::of(v).median
}

/// Streams sent at once on one connection: does the server take as many as it says?
async fn concurrency_h2(sc: &Scenario, max: Option<u32>) -> Result<Concurrency, ProbeError> {
    let head = sc.targets[0]
        .h2_request
        .clone()
        .expect("h2 scenarios carry an HTTP/2 request head");
    let c = std::rc::Rc::new(
        probe::h2::open(&sc.origins[0], sc.tls.as_ref(), sc.timeout, &sc.dns).await?,
    );
    let tried = max.unwrap_or(CONCURRENCY_PROBE).clamp(1, CONCURRENCY_PROBE);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..tried {
        let c = c.clone();
        let head = head.clone();
        let timeout = sc.timeout;
        set.spawn_local(async move { c.exchange(&head, timeout).await });
    }
    let mut out = Concurrency {
        tried: u64::from(tried),
        answered: 0,
        refused: 0,
        failed: 0,
    };
    while let Some(r) = set.join_next().await {
        match r {
            Ok(Ok(_)) => out.answered += 1,
            Ok(Err(e)) if e.message.contains("refused_stream") => out.refused += 1,
            _ => out.failed += 1,
        }
    }
    Ok(out)
}

/// The HTTP/2 probes, each on connections of its own.
async fn h2_findings(sc: &Scenario, max_req: u64, max_idle: Duration, steps: &Steps) -> H2Findings {
    steps.say(&format!(
        "HTTP/2: SETTINGS, up to {max_req} streams on one connection, streams at once"
    ));
    let first = probe::h2::open(&sc.origins[0], sc.tls.as_ref(), sc.timeout, &sc.dns).await;
    let c = match first {
        Ok(c) => c,
        Err(e) => {
            return H2Findings {
                settings: Default::default(),
                h2_setup_ms: 0.0,
                max_requests: None,
                idle_timeout: None,
                concurrency: None,
                error: Some(e.to_string()),
            }
        }
    };
    let settings = c.settings;
    let h2_setup_ms = secs(c.h2_setup) * 1000.0;
    drop(c);
    let mut error = None;
    let max_requests = match max_requests(sc, max_req).await {
        Ok(m) => Some(m),
        Err(e) => {
            error = Some(e.to_string());
            None
        }
    };
    let concurrency = match concurrency_h2(sc, settings.max_concurrent_streams).await {
        Ok(c) => Some(c),
        Err(e) => {
            error.get_or_insert(e.to_string());
            None
        }
    };
    let idle = Some(idle_probes(&Arc::new(sc.clone()), max_idle, None, steps, "HTTP/2 ").await);
    H2Findings {
        settings,
        h2_setup_ms,
        max_requests,
        idle_timeout: idle,
        concurrency,
        error,
    }
}

/// Findings and problems from the HTTP/2 probes.
/// The idle-timeout probes, said on stderr with their bound: a first round of at most
/// `max_idle`, then up to four narrowing rounds, each no longer than the close seen.
async fn idle_probes(
    sc: &Arc<Scenario>,
    max_idle: Duration,
    claimed: Option<f64>,
    steps: &Steps,
    proto: &str,
) -> IdleTimeout {
    let what = format!("{proto}idle timeout");
    let bound = format!(
        "at most 5 rounds of idle waits up to {} s (--max-idle)",
        fmt_ms(secs(max_idle))
    );
    steps.say(&format!(
        "{what}: connections held idle, then narrowed: {bound}"
    ));
    steps
        .ticking(&what, &bound, idle_timeout(sc, max_idle, claimed, steps))
        .await
}

/// The bound every probe keeps: no single wait (a name, a connect, a handshake, an
/// answer) longer than `--timeout`.
fn each_wait(sc: &Scenario) -> String {
    format!(
        "each wait at most {} s, --timeout",
        fmt_ms(secs(sc.timeout))
    )
}

/// The finding of an idle-timeout probe: "{label}: the server {ends} after A-B s (N
/// probes)." or "{label}: idle connections stay open for at least A s (--max-idle)."
/// Returns the probe's lower bound, as written, when the server ends idle connections
/// sooner than pools and load balancers commonly keep them (a problem to name).
fn idle_finding(
    i: &IdleTimeout,
    label: &str,
    (ends, figure): (&str, &str),
    findings: &mut Vec<Finding>,
) -> Option<(String, String)> {
    let at_least = fmt_ms(i.at_least_s);
    let Some(hi) = i.at_most_s else {
        findings.push(
            Finding::new(
                "idle_timeout_not_met",
                Cause::Measured,
                format!(
                    "{label}: idle connections stay open for at least {at_least} s (--max-idle)."
                ),
            )
            .with(idle_evidence(i, figure)),
        );
        return None;
    };
    findings.push(
        Finding::new(
            "idle_timeout",
            Cause::Measured,
            format!(
                "{label}: the server {ends} after {at_least}-{} s ({} probes).",
                fmt_ms(hi),
                i.probes
            ),
        )
        .with(idle_evidence(i, figure)),
    );
    // Measured between two probes, so said as its bounds: the range, and the lower bound
    // a client must stay under.
    (hi < SHORT_IDLE_S).then(|| (format!("{at_least}-{}", fmt_ms(hi)), at_least))
}

/// An idle timeout as the probes bound it: between the longest idle time a connection
/// survived and the shortest after which it was found closed (in seconds).
fn idle_evidence(i: &IdleTimeout, figure: &str) -> Evidence {
    Evidence {
        // Open at the probe's limit: a lower bound only, the value.
        bounds: i.at_most_s.map(|hi| [i.at_least_s, hi]),
        ..Evidence::mean(figure, i.at_least_s, Some("s"), i.probes, "idle probes")
    }
}

/// The evidence of a requests-per-connection probe: the limit met (or the requests
/// probed without meeting one) on one connection.
fn max_requests_evidence(m: &MaxRequests, figure: &str) -> Evidence {
    Evidence::figure(
        figure,
        m.limit.unwrap_or(m.probed) as f64,
        None,
        if m.limit.is_some() {
            "requests on one connection before the server ended it"
        } else {
            "requests on one connection without meeting a limit"
        },
    )
}

/// The requests-per-connection finding (HTTP/1 and HTTP/2, each in its own words): the
/// limit when it is low enough to be a problem, which the caller says in its words.
fn max_requests_finding(
    m: &MaxRequests,
    (limit, none_met): (impl Fn(u64) -> String, impl Fn(u64) -> String),
    figure: &str,
    findings: &mut Vec<Finding>,
) -> Option<u64> {
    let (code, text) = match m.limit {
        Some(n) => ("max_requests", limit(n)),
        None => ("max_requests_not_met", none_met(m.probed)),
    };
    findings.push(Finding::new(code, Cause::Measured, text).with(max_requests_evidence(m, figure)));
    m.limit.filter(|n| *n < LOW_MAX_REQUESTS)
}

fn judge_h2(
    h: &H2Findings,
    server: Option<ServerKind>,
    findings: &mut Vec<Finding>,
    problems: &mut Vec<Finding>,
) {
    if let Some(e) = &h.error {
        // Nothing of HTTP/2 was measured: no SETTINGS, no limits to report.
        findings.push(Finding::new(
            "h2_probes_failed",
            Cause::Protocol,
            format!("HTTP/2 probes failed: {e}"),
        ));
        problems.push(Finding::new("h2_not_spoken", Cause::Protocol, format!(
            "HTTP/2 was asked for and the server does not speak it here ({e}). A client that needs HTTP/2 gets HTTP/1.1 or nothing; turn it on {}.",
            fix(Setting::H2On, server)
        )).explaining(true));
        return;
    }
    let s = &h.settings;
    let shown = |v: Option<u32>, default: &str| v.map_or(default.to_string(), |v| v.to_string());
    let streams = |m: u32| {
        Evidence::figure(
            "h2.settings.max_concurrent_streams",
            f64::from(m),
            None,
            "streams at once on one connection (the server's SETTINGS)",
        )
    };
    let mut settings = Finding::new("h2_settings", Cause::Measured, format!(
        "HTTP/2: SETTINGS max concurrent streams {}, initial window {}, max frame {}; the server's SETTINGS came {} ms after the preface.",
        shown(s.max_concurrent_streams, "unlimited"),
        shown(s.initial_window_size, "65535 (default)"),
        shown(s.max_frame_size, "16384 (default)"),
        fmt_ms(h.h2_setup_ms)
    )).with(Evidence::figure("h2.h2_setup_ms", h.h2_setup_ms, Some("ms"), "the SETTINGS probe"));
    if let Some(m) = s.max_concurrent_streams {
        settings = settings.with(streams(m));
    }
    findings.push(settings);
    if let Some(m) = s
        .max_concurrent_streams
        .filter(|m| *m < LOW_CONCURRENT_STREAMS)
    {
        problems.push(Finding::new("h2_few_streams", Cause::Protocol, format!(
            "The server allows only {m} concurrent HTTP/2 streams per connection: a client multiplexing more requests waits for a stream or opens more connections (browsers and gRPC expect about 100). Raise it {}.",
            fix(Setting::H2Streams, server)
        )).with(streams(m)));
    }
    if let Some(c) = &h.concurrency {
        let refused = Evidence::count(
            "h2.concurrency.refused",
            c.refused,
            c.tried,
            "streams sent at once on one connection",
        );
        findings.push(Finding::new("h2_concurrency", Cause::Measured, format!(
            "HTTP/2: {} streams sent at once on one connection: {} answered, {} refused, {} failed.",
            c.tried, c.answered, c.refused, c.failed
        )).with(Evidence::count("h2.concurrency.answered", c.answered, c.tried, "streams sent at once on one connection")).with(refused.clone()));
        if c.refused > 0 {
            problems.push(Finding::new("h2_streams_refused", Cause::Protocol, format!(
                "The server refused {} of {} concurrent streams that its SETTINGS allowed: clients see REFUSED_STREAM and must retry.",
                c.refused, c.tried
            )).with(refused));
        }
    }
    if let Some(m) = &h.max_requests {
        let said = max_requests_finding(
            m,
            (
                |n| format!("HTTP/2: the server ends a connection with GOAWAY after {n} streams."),
                |p| format!("HTTP/2: at least {p} streams on one connection (no limit met)."),
            ),
            "h2.max_requests",
            findings,
        );
        if let Some(n) = said {
            problems.push(Finding::new("h2_max_requests_low", Cause::Reuse, format!(
                "The server sends GOAWAY after {n} HTTP/2 streams: a busy client sets up a new connection (and TLS handshake) every {n} requests. Raise the limit {}.",
                fix(Setting::H2MaxRequests, server)
            )).with(max_requests_evidence(m, "h2.max_requests")));
        }
    }
    if let Some(i) = &h.idle_timeout {
        let ends = ("ends idle connections (GOAWAY or close)", "h2.idle_timeout");
        if let Some((range, lo)) = idle_finding(i, "HTTP/2 idle timeout", ends, findings) {
            problems.push(Finding::new("h2_idle_timeout_short", Cause::Reuse, format!(
                "The server ends idle HTTP/2 connections after {range} s (between two probes): a client that keeps its connection longer meets a GOAWAY and reconnects; keep the client's idle time under {lo} s, or raise the server's {}.",
                fix(Setting::H2IdleTimeout, server)
            )).with(idle_evidence(i, "h2.idle_timeout")));
        }
    }
}

/// The probes of a connection that is kept: requests per connection, then its idle
/// timeout; each a unit of `steps`.
async fn kept_probes(
    sc: &Scenario,
    max_req: u64,
    max_idle: Duration,
    claimed: Option<f64>,
    steps: &Steps,
) -> anyhow::Result<(MaxRequests, IdleTimeout)> {
    steps.say(&format!(
        "requests per connection: up to {max_req} on one connection (--max-requests)"
    ));
    let max_requests = max_requests(sc, max_req).await?;
    steps.advance();
    let idle = idle_probes(&Arc::new(sc.clone()), max_idle, claimed, steps, "").await;
    steps.advance();
    Ok((max_requests, idle))
}

/// `probe`, or `None` when Ctrl-C comes first (or came before it began).
async fn unless_interrupted<T>(probe: impl std::future::Future<Output = T>) -> Option<T> {
    if crate::interrupt::requested() {
        return None;
    }
    tokio::select! {
        biased;
        () = crate::interrupt::stopped() => None,
        r = probe => Some(r),
    }
}

/// TLS's probes for an https:// target (none for http://), unless Ctrl-C came.
async fn tls_part(
    sc: &Scenario,
    req: &RequestConfig,
    steps: &Steps,
) -> Result<Option<TlsFindings>, ProbeError> {
    if !sc.origins[0].tls {
        return Ok(None);
    }
    steps.say("TLS: full and resumed handshakes, early data");
    advanced(
        steps,
        unless_interrupted(tls_findings(sc, req, steps)).await,
    )
    .transpose()
}

/// `found`, with one more probe said done on `steps`.
fn advanced<T>(steps: &Steps, found: T) -> T {
    steps.advance();
    found
}

/// Probe everything and build the verdict.
pub async fn execute(
    sc: &Scenario,
    h2_sc: Option<&Scenario>,
    req: &RequestConfig,
    max_req: u64,
    max_idle: Duration,
    steps: &Steps,
) -> anyhow::Result<DoctorReport> {
    let t = &sc.targets[0];
    let tls_probes = 3 * u64::from(sc.origins[0].tls);
    // The probes: keep-alive; requests per connection and idle timeout when it keeps;
    // TLS, its key exchange and HTTP/3 over TLS; HTTP/2 when asked (and offered).
    let probes = |keeps: bool, h2: bool| 1 + 2 * u64::from(keeps) + tls_probes + u64::from(h2);
    steps.set_total(probes(true, h2_sc.is_some()), false);
    steps.say(&format!(
        "{}: does HTTP/1.1 and HTTP/1.0 keep the connection? (3 connections; {})",
        t.url,
        each_wait(sc)
    ));
    let (http11, ex11) = persist_probe(sc, &t.request).await;
    if let (Some(e), None) = (&http11.error, &ex11) {
        if sc.origins[0].tls && http11.tcp_unreachable {
            return h3_only(sc, http11, req, steps);
        }
        return Err(Unreachable::new(&t.url, e, http11.error_key).into());
    }
    let req10 = t
        .template
        .build(HttpVersion::Http10, ConnectionHeader::Default);
    let (http10, _) = persist_probe(sc, &req10).await;
    let req10ka = t
        .template
        .build(HttpVersion::Http10, ConnectionHeader::KeepAlive);
    let (http10_keep_alive, ex10ka) = persist_probe(sc, &req10ka).await;
    let claimed = ex11
        .as_ref()
        .and_then(Exchange::keep_alive_timeout)
        .or_else(|| ex10ka.as_ref().and_then(Exchange::keep_alive_timeout));

    let keeps = http11.persistent && http11.reused;
    steps.set_total(probes(keeps, h2_sc.is_some()), false);
    steps.advance();
    // From here each probe runs unless Ctrl-C came (one under way is given up): the
    // report holds the probes that ended.
    let (max_requests, idle) = if keeps {
        unless_interrupted(kept_probes(sc, max_req, max_idle, claimed, steps))
            .await
            .transpose()?
            .unzip()
    } else {
        (None, None)
    };
    let tls = tls_part(sc, req, steps).await?;

    // HTTP/2 where the server offers it (or --h2c asked for it on http://).
    let speaks_h2 = tls.as_ref().map_or(true, |t| t.offers_h2);
    let h2_sc = h2_sc.filter(|_| speaks_h2);
    steps.set_total(probes(keeps, h2_sc.is_some()), false);
    let h2 = match h2_sc {
        Some(s) => advanced(
            steps,
            unless_interrupted(h2_findings(s, max_req, max_idle, steps)).await,
        ),
        None => None,
    };
    // HTTP/3 at the port its Alt-Svc names (else the URL's); the engine's own threads
    // run the probes, this one waits.
    let h3 = (sc.origins[0].tls && !crate::interrupt::requested()).then(|| {
        steps.say(&format!(
            "HTTP/3: QUIC handshake, resumption, 0-RTT (at most {} requests; {})",
            h3::PROBE_REQUESTS,
            each_wait(sc)
        ));
        let alt_svc = ex11
            .as_ref()
            .and_then(|e| e.header("alt-svc"))
            .map(str::to_string);
        let found = h3::probe(&t.url, alt_svc, req, sc.timeout);
        steps.advance();
        found
    });

    let server_header = ex11
        .as_ref()
        .and_then(|e| e.header("server"))
        .map(str::to_string);
    let mut report = DoctorReport {
        schema_version: crate::report::SCHEMA_VERSION,
        tool: "handshake",
        version: env!("CARGO_PKG_VERSION"),
        url: t.url.clone(),
        link: None,
        server_kind: ServerKind::recognise(server_header.as_deref()),
        server: server_header,
        http11,
        http10: Some(http10),
        http10_keep_alive: Some(http10_keep_alive),
        max_requests,
        idle_timeout: idle,
        tls,
        h2,
        h3,
        policy: Finding::new("policy", Cause::Measured, String::new()),
        findings: Vec::new(),
        problems: Vec::new(),
        interrupted: None,
    };
    (report.findings, report.problems) = judge(&report);
    report.policy = policy(&report);
    Ok(report)
}

/// The server's connection policy in one line: keep-alive over HTTP/1.1 and 1.0, the
/// requests per connection, the idle timeout, TLS resumption and early data, HTTP/2's
/// streams and HTTP/3, as far as probed; with the probes' figures it was read from (the
/// idle timeout as its bounds).
pub fn policy(r: &DoctorReport) -> Finding {
    let mut parts = Vec::new();
    let mut evidence = Vec::new();
    http1_policy(r, &mut parts, &mut evidence);
    if let Some(m) = &r.max_requests {
        parts.push(match m.limit {
            Some(n) => format!("{n} requests per connection"),
            None => format!("at least {} requests per connection", m.probed),
        });
        evidence.push(match m.limit {
            Some(n) => {
                Evidence::figure("max_requests.limit", n as f64, None, "one probe connection")
            }
            // No limit reached: a floor, not a limit.
            None => Evidence::figure(
                "max_requests.probed (no limit reached: at least)",
                m.probed as f64,
                None,
                "one probe connection",
            ),
        });
    }
    if let Some(i) = &r.idle_timeout {
        parts.push(idle_policy(i));
        // Bounded, not measured exactly: between the longest wait the connection
        // outlived and the shortest it did not (no upper bound when none ended it).
        evidence.push(match i.at_most_s {
            Some(hi) => Evidence {
                bounds: Some([i.at_least_s, hi]),
                ..Evidence::figure(
                    "idle_timeout (at_least_s, at_most_s)",
                    i.at_least_s,
                    Some("s"),
                    "idle probe connections",
                )
            },
            None => Evidence::figure(
                "idle_timeout.at_least_s (open at the end of --max-idle)",
                i.at_least_s,
                Some("s"),
                "idle probe connections",
            ),
        });
    }
    if let Some(t) = &r.tls {
        let early = match t.early_data {
            Some(e) if e.accepted => ", 0-RTT",
            _ => ", no 0-RTT",
        };
        let resumption = if t.resumption {
            format!("resumption{early}")
        } else {
            "no resumption".to_string()
        };
        parts.push(format!("{} with {resumption}", t.version));
        evidence.push(probe("tls.resumption", yes(t.resumption)));
    }
    if let Some(h) = &r.h2 {
        parts.push(match h.settings.max_concurrent_streams {
            _ if h.error.is_some() => "no HTTP/2 (asked for, not spoken)".to_string(),
            Some(n) => format!("HTTP/2 ({n} streams at once)"),
            None => "HTTP/2".to_string(),
        });
        if let (None, Some(n)) = (&h.error, h.settings.max_concurrent_streams) {
            evidence.push(probe("h2.settings.max_concurrent_streams", f64::from(n)));
        }
    }
    if let Some(h) = &r.h3 {
        parts.push(if h.answered {
            let early = match h.early_data {
                Some(e) if e.accepted => ", 0-RTT",
                _ => "",
            };
            format!("HTTP/3{early}")
        } else {
            "no HTTP/3".to_string()
        });
        evidence.push(probe("h3.answered", yes(h.answered)));
    }
    Finding::new(
        "policy",
        Cause::Measured,
        format!("Policy: {}.", parts.join("; ")),
    )
    .with_all(evidence)
}

/// 1 for yes, 0 for no: a probe's answer as a figure.
fn yes(b: bool) -> f64 {
    f64::from(u8::from(b))
}

/// A figure one of the probes read.
fn probe(figure: &str, v: f64) -> Evidence {
    Evidence::figure(figure, v, None, "probe connections")
}

/// The policy's HTTP/1 parts: keep-alive over HTTP/1.1 and 1.0 (or the error the server
/// answered with instead), with the probes' figures.
fn http1_policy(r: &DoctorReport, parts: &mut Vec<String>, evidence: &mut Vec<Evidence>) {
    if r.http10.is_some() {
        let h11 = &r.http11;
        parts.push(if let Some(st) = error_status(h11) {
            evidence.push(probe("http11.status", f64::from(st)));
            format!("HTTP/1.1 answered {st} (not its policy for a request it serves)")
        } else if h11.persistent && h11.reused {
            "HTTP/1.1 keep-alive".to_string()
        } else if h11.error.is_some() && h11.status.is_none() {
            "HTTP/1.1 not answered".to_string()
        } else {
            "HTTP/1.1 closes after each response".to_string()
        });
        evidence.push(probe("http11.reused", yes(h11.reused)));
        if let (Some(a), Some(b), None) = (&r.http10, &r.http10_keep_alive, error_status(h11)) {
            parts.push(
                match (a.reused, b.reused) {
                    (true, _) => "HTTP/1.0 keep-alive",
                    (false, true) => "HTTP/1.0 keep-alive only when asked",
                    (false, false) => "HTTP/1.0 closes",
                }
                .to_string(),
            );
            evidence.push(probe("http10.reused", yes(a.reused)));
            evidence.push(probe("http10_keep_alive.reused", yes(b.reused)));
        }
    }
}

/// The HTTP/1.1 probe's status when it was an error (4xx or 5xx).
fn error_status(p: &PersistProbe) -> Option<u16> {
    p.status.filter(|s| *s >= 400)
}

/// "idle timeout 3.0-3.1 s", or "idle connections kept at least 2.0 s".
fn idle_policy(i: &IdleTimeout) -> String {
    match i.at_most_s {
        Some(hi) => format!("idle timeout {:.1}-{hi:.1} s", i.at_least_s),
        None => format!("idle connections kept at least {:.1} s", i.at_least_s),
    }
}

/// What the probes found, and the problems among it, in the order the report gives
/// them: the server, HTTP/1, its limits, TLS, HTTP/2, HTTP/3.
fn judge(r: &DoctorReport) -> (Vec<Finding>, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut problems = Vec::new();
    let server = r.server_kind;
    if let Some(h) = &r.server {
        findings.push(Finding::new(
            "server_says",
            Cause::Measured,
            format!(
                "The server says it is `{h}`{}.",
                if server.is_some() {
                    ": fixes below name its own settings"
                } else {
                    ""
                }
            ),
        ));
    }
    if let Some(st) = error_status(&r.http11) {
        // What the server does with an error answer is not its policy for the requests
        // it serves (nginx closes after most 4xx): the status is said, not keep-alive.
        let said = crate::record::status_example(st)
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        problems.push(Finding::new("error_status", Cause::Status, format!(
            "The server answered the probes' request with {st}{said}: what it does with the connection after an error says nothing of its keep-alive for requests it serves, so none is claimed. Fix the request first (the URL's scheme and port, its path, -H headers), then run doctor again."
        )).with(Evidence::figure("http11.status", f64::from(st), None, "the probes' first response")).explaining(true));
    } else {
        if let (Some(http10), Some(http10_keep_alive)) = (&r.http10, &r.http10_keep_alive) {
            let keeps = r.http11.persistent && r.http11.reused;
            let persistence = [&r.http11, http10, http10_keep_alive];
            judge_http1(persistence, keeps, server, &mut findings, &mut problems);
        }
        if let Some(m) = &r.max_requests {
            judge_max_requests(m, server, &mut findings, &mut problems);
        }
        if let Some(i) = &r.idle_timeout {
            judge_idle(i, server, &mut findings, &mut problems);
        }
    }
    if let Some(t) = &r.tls {
        judge_tls(t, server, &mut findings, &mut problems);
    }
    if let Some(h) = &r.h2 {
        judge_h2(h, server, &mut findings, &mut problems);
    }
    if let Some(h) = &r.h3 {
        h3::judge(h, server, &mut findings, &mut problems);
    }
    if let Some(t) = &r.tls {
        let quic = r.h3.as_ref().is_some_and(|h| h.answered);
        flight::judge(t, quic, &mut problems);
    }
    (findings, problems)
}

/// The HTTP/1.1, HTTP/1.0 and HTTP/1.0 keep-alive persistence probes, judged.
fn judge_http1(
    [http11, http10, http10_keep_alive]: [&PersistProbe; 3],
    keeps: bool,
    server: Option<ServerKind>,
    findings: &mut Vec<Finding>,
    problems: &mut Vec<Finding>,
) {
    let version = http11.http_version.clone().unwrap_or_default();
    let f = |code, cause, text: String| Finding::new(code, cause, text);
    if keeps {
        findings.push(
            f(
                "http11_kept",
                Cause::Measured,
                format!("HTTP/1.1: the connection is kept open and reused (the server answers {version})."),
            )
            .with(persisted("http11", http11)),
        );
    } else {
        findings.push(f("http11_closed", Cause::Reuse, format!(
            "HTTP/1.1: the server ends the connection after each response (it answers {version}{}).",
            http11.connection_header.as_deref().map(|c| format!(", Connection: {c}")).unwrap_or_default()
        )).with(persisted("http11", http11)));
        problems.push(f("keep_alive_off", Cause::Reuse, format!(
            "The server closes HTTP/1.1 connections after every response (keep-alive is off): every request pays a new TCP (and TLS) handshake. Turn keep-alive on {}.",
            fix(Setting::KeepAlive, server)
        )).with(persisted("http11", http11)));
    }
    findings.push(
        if http10.persistent {
            f(
            "http10_kept",
            Cause::Measured,
            "HTTP/1.0 without a keep-alive header: the server keeps the connection open anyway."
                .to_string(),
        )
        } else {
            f(
                "http10_closed",
                Cause::Measured,
                format!(
                "HTTP/1.0 without a keep-alive header: the connection ends after the response{}.",
                if http10.server_closed {
                    " (the server closes it)"
                } else {
                    ""
                }
            ),
            )
        }
        .with(persisted("http10", http10)),
    );
    let honours = http10_keep_alive.persistent && http10_keep_alive.reused;
    let e = || persisted("http10_keep_alive", http10_keep_alive);
    if honours {
        findings.push(
            f(
                "http10_keep_alive_honoured",
                Cause::Measured,
                "HTTP/1.0 with `Connection: keep-alive`: honoured, the connection is reused."
                    .to_string(),
            )
            .with(e()),
        );
    } else {
        findings.push(f("http10_keep_alive_ignored", Cause::Reuse, "HTTP/1.0 with `Connection: keep-alive`: ignored, the connection ends after the response.".to_string()).with(e()));
        problems.push(
            f("http10_keep_alive_ignored", Cause::Reuse, "The server ignores `Connection: keep-alive` on HTTP/1.0: HTTP/1.0 clients (ab without -k, old proxies and libraries) open a connection per request. Have clients speak HTTP/1.1, or enable keep-alive for HTTP/1.0 on the server.".to_string()).with(e()),
        );
    }
}

/// A persistence probe's outcome: whether its connection carried a second request (1)
/// or not (0), of the one connection probed.
fn persisted(figure: &str, p: &PersistProbe) -> Evidence {
    Evidence::count(
        &format!("{figure}.reused"),
        u64::from(p.persistent && p.reused),
        1,
        "connections probed (a second request sent on it)",
    )
}

fn judge_max_requests(
    m: &MaxRequests,
    server: Option<ServerKind>,
    findings: &mut Vec<Finding>,
    problems: &mut Vec<Finding>,
) {
    let said = max_requests_finding(
        m,
        (
            |n| {
                format!(
                    "Max requests per connection: the server ends a connection after {n} requests."
                )
            },
            |p| format!("Max requests per connection: at least {p} (no limit met)."),
        ),
        "max_requests",
        findings,
    );
    if let Some(n) = said {
        problems.push(Finding::new("max_requests_low", Cause::Reuse, format!(
            "The server closes each connection after {n} requests: busy clients reconnect every {n} requests. Raise the limit {}.",
            fix(Setting::MaxRequests, server)
        )).with(max_requests_evidence(m, "max_requests")));
    }
}

/// The idle timeout found, and whether the server's `Keep-Alive: timeout=` matches it.
fn judge_idle(
    i: &IdleTimeout,
    server: Option<ServerKind>,
    findings: &mut Vec<Finding>,
    problems: &mut Vec<Finding>,
) {
    let ends = ("closes idle connections", "idle_timeout");
    if let Some((range, lo)) = idle_finding(i, "Idle timeout", ends, findings) {
        problems.push(Finding::new("idle_timeout_short", Cause::Reuse, format!(
            "The server closes idle connections after {range} s (between two probes): a client pool whose idle timeout is {lo} s or longer will meet stale connections (and a load balancer in front, 502s); keep it under {lo} s, or raise the server's idle timeout above the pool's {}.",
            fix(Setting::IdleTimeout, server)
        )).with(idle_evidence(i, "idle_timeout")));
    }
    if let Some(c) = i.claimed_s {
        let hi = i.at_most_s.unwrap_or(f64::INFINITY);
        let claimed = Evidence::figure(
            "idle_timeout.claimed_s",
            c,
            Some("s"),
            "the server's Keep-Alive header",
        );
        let f = |code, cause, text| {
            Finding::new(code, cause, text)
                .with(claimed.clone())
                .with(idle_evidence(i, "idle_timeout"))
        };
        if c + 1.0 < i.at_least_s || c > hi + 1.0 {
            problems.push(f("keep_alive_header_mismatch", Cause::Reuse, format!(
                "The server's `Keep-Alive: timeout={c}` header does not match what it does (idle connections closed after {}-{} s): clients that trust the header will misjudge reuse.",
                fmt_ms(i.at_least_s),
                i.at_most_s.map(fmt_ms).unwrap_or("∞".into())
            )));
        } else if i.at_most_s.is_none() {
            // Open at the probe's limit: the claim is not contradicted, not confirmed.
            findings.push(f("keep_alive_header_not_contradicted", Cause::Measured, format!(
                "Its `Keep-Alive: timeout={c}` header is not contradicted: idle connections stayed open for at least {} s, the probe's limit (--max-idle {}s would check it).",
                fmt_ms(i.at_least_s),
                (c + 5.0).ceil()
            )));
        } else {
            findings.push(f(
                "keep_alive_header_matches",
                Cause::Measured,
                format!("Its `Keep-Alive: timeout={c}` header matches what it does."),
            ));
        }
    }
}

fn judge_tls(
    t: &TlsFindings,
    server: Option<ServerKind>,
    findings: &mut Vec<Finding>,
    problems: &mut Vec<Finding>,
) {
    let f = |code, cause, text: String| Finding::new(code, cause, text);
    findings.push(f(
        "tls",
        Cause::Measured,
        format!(
            "TLS: {} with {}; offered h2 and http/1.1, the server chose {}.",
            t.version,
            t.cipher_suite,
            t.alpn_selected.as_deref().unwrap_or("none (no ALPN)")
        ),
    ));
    if !t.offers_h2 {
        findings.push(f(
            "h2_not_offered",
            Cause::Protocol,
            "The server does not offer HTTP/2 (ALPN h2): multiplexing is not available."
                .to_string(),
        ));
    }
    let full = Evidence::figure(
        "tls.full_handshake_ms",
        t.full_handshake_ms,
        Some("ms"),
        "full handshakes (median)",
    );
    match t.resumed_handshake_ms {
        Some(r) => findings.push(
            f(
                "tls_resumption",
                Cause::Measured,
                format!(
                    "TLS session resumption works: a full handshake took {} ms, a resumed one {} ms.",
                    fmt_ms(t.full_handshake_ms),
                    fmt_ms(r)
                ),
            )
            .with(full)
            .with(Evidence::figure(
                "tls.resumed_handshake_ms",
                r,
                Some("ms"),
                "resumed handshakes (median)",
            )),
        ),
        None => problems.push(f("resumption_never_granted", Cause::Protocol, format!(
            "TLS sessions are not resumed: every new connection pays a full handshake ({} ms here). Enable session tickets or a session cache on the server.",
            fmt_ms(t.full_handshake_ms)
        )).with(full)),
    }
    match t.early_data {
        Some(EarlyDataFinding { accepted: true, .. }) => findings.push(f(
            "early_data_accepted",
            Cause::Measured,
            "TLS 1.3 early data (0-RTT): accepted; a client's first request on a resumed connection can go with its ClientHello, a round trip sooner (idempotent requests only: early data can be replayed).".to_string(),
        )),
        Some(EarlyDataFinding { offered: true, .. }) => findings.push(f(
            "early_data_rejected",
            Cause::Protocol,
            "TLS 1.3 early data (0-RTT): the server's ticket allowed it, but the server rejected the request sent in it (it was sent again after the handshake).".to_string(),
        )),
        Some(_) => findings.push(f(
            "early_data_not_offered",
            Cause::Protocol,
            format!(
                "TLS 1.3 early data (0-RTT): not offered; the server's session tickets do not allow it {}.",
                fix(Setting::EarlyData, server)
            ),
        )),
        None => {}
    }
    kx::judge(&t.key_exchange, findings, problems);
}

/// No TCP connection to an https:// URL: the server may speak only HTTP/3. QUIC is
/// probed at the same port; what needs TCP (HTTP/1.x, HTTP/2, TLS over TCP) is not.
fn h3_only(
    sc: &Scenario,
    tcp: PersistProbe,
    req: &RequestConfig,
    steps: &Steps,
) -> anyhow::Result<DoctorReport> {
    let url = &sc.targets[0].url;
    let why = tcp.error.clone().unwrap_or_default();
    steps.set_total(2, false);
    steps.advance();
    steps.say(&format!(
        "no TCP connection ({why}): trying HTTP/3 over QUIC at the same port (at most {} requests; {})",
        h3::PROBE_REQUESTS,
        each_wait(sc)
    ));
    let h3 = h3::probe(url, None, req, sc.timeout);
    if !h3.answered {
        let why = format!(
            "{why}; HTTP/3 at UDP port {} did not answer either: {}",
            h3.port,
            h3.error.as_deref().unwrap_or("no answer")
        );
        return Err(Unreachable::new(url, &why, tcp.error_key).into());
    }
    let mut findings = vec![Finding::new("h3_only", Cause::Transport, format!(
        "TCP: no connection ({why}); the server answers only over QUIC (HTTP/3). HTTP/1.x, HTTP/2 and TLS over TCP were not probed, and clients without HTTP/3 (most load tools, networks that block UDP) cannot reach it."
    ))];
    let mut problems = Vec::new();
    h3::judge(&h3, None, &mut findings, &mut problems);
    let mut report = DoctorReport {
        schema_version: crate::report::SCHEMA_VERSION,
        tool: "handshake",
        version: env!("CARGO_PKG_VERSION"),
        url: url.clone(),
        server: None,
        server_kind: None,
        link: None,
        http11: tcp,
        http10: None,
        http10_keep_alive: None,
        max_requests: None,
        idle_timeout: None,
        tls: None,
        h2: None,
        h3: Some(h3),
        policy: Finding::new("policy", Cause::Measured, String::new()),
        findings,
        problems,
        interrupted: None,
    };
    report.policy = policy(&report);
    Ok(report)
}
