//! The doctor's probes: each asks the server one question over real connections
//! (does it keep a connection, how many requests, how long idle, TLS's handshakes, HTTP/2's
//! streams) and returns what it saw, judged nowhere here.

use super::kx::{self, median};

use crate::fmt::ms as fmt_ms;
use crate::net::tls;
use crate::plan::build::RequestConfig;
use crate::plan::Scenario;
use crate::probe;
use crate::probe::any::Probe;
use crate::probe::Exchange;
use crate::probe::ProbeError;
use crate::progress::Steps;
use crate::proto::h3::client::Endpoints;
use crate::report::doctor::Concurrency;
use crate::report::doctor::EarlyDataFinding;
use crate::report::doctor::H2Findings;
use crate::report::doctor::IdleTimeout;
use crate::report::doctor::MaxRequests;
use crate::report::doctor::PersistProbe;
use crate::report::doctor::TlsFindings;
use crate::report::doctor::{ClientCertPolicy, WithoutCertificate};

use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long to wait for a server to close a connection it said it would end.
const CLOSE_WATCH: Duration = Duration::from_secs(1);
/// A range of the idle timeout is narrow enough at this width (or 10 %).
const IDLE_RESOLUTION_S: f64 = 0.5;
/// Handshakes timed for the full vs resumed cost.
pub(super) const HANDSHAKE_SAMPLES: usize = 5;
/// HTTP/2: streams sent at once on one connection to see whether the server takes them.
const CONCURRENCY_PROBE: u32 = 100;

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Send `request` on a fresh connection; if the response lets it persist, send it again.
pub(super) async fn persist_probe(
    sc: &Scenario,
    request: &[u8],
) -> (PersistProbe, Option<Exchange>) {
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
        close_delimited: false,
        error: None,
        error_key: None,
        tcp_unreachable: false,
        said: None,
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
    p.close_delimited = ex.close_delimited;
    p.said = ex.said.clone();
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
pub(super) async fn max_requests(sc: &Scenario, limit: u64) -> Result<MaxRequests, ProbeError> {
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
pub(super) enum IdleSeen {
    /// Still worked after this idle wait.
    OpenAfter(f64),
    /// Closed: by the server's FIN after this long idle, or found closed at this wait.
    ClosedAt(f64),
    Failed,
}

/// One connection, opened after `after`: a request, then idle for `wait` (watching for
/// the server's close, or over HTTP/2 its GOAWAY), then another request.
pub(super) async fn idle_probe(sc: Arc<Scenario>, after: Duration, wait: Duration) -> IdleSeen {
    tokio::time::sleep(after).await;
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

/// The probes of a round go idle at moments spread over this: a server whose timer
/// ticks once a second (lighttpd's) closes a connection anywhere within the tick after
/// its timeout, and probes that all went idle together would all see the same moment.
const IDLE_STAGGER: Duration = Duration::from_secs(1);

/// Run idle probes with these waits in parallel, each opened a share of
/// [`IDLE_STAGGER`] after the one before; fold into (at least, at most). Once a close is
/// seen, probes that would wait longer are cancelled: they cannot narrow it.
pub(super) async fn idle_round(
    sc: &Arc<Scenario>,
    waits: &[f64],
    lo: &mut f64,
    hi: &mut Option<f64>,
) -> u64 {
    let mut set = tokio::task::JoinSet::new();
    let n = waits.len().max(1) as u32;
    let handles: Vec<(f64, tokio::task::AbortHandle)> = waits
        .iter()
        .enumerate()
        .map(|(k, w)| {
            let after = IDLE_STAGGER * k as u32 / n;
            let probe = idle_probe(sc.clone(), after, Duration::from_secs_f64(*w));
            (*w, set.spawn_local(probe))
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

pub(super) async fn idle_timeout(
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
        // Narrow enough, or no single time to narrow: a probe outlived another's close.
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
        varies: hi.is_some_and(|h| lo > h),
    }
}

/// A new connection to the target that has had one exchange, so the server's session
/// tickets (sent after the handshake) are read.
pub(super) async fn primed(
    sc: &Scenario,
    cfg: &Arc<rustls::ClientConfig>,
) -> Result<probe::Opened, ProbeError> {
    let t = &sc.targets[0];
    let mut o = probe::open(&sc.origins[0], Some(cfg), sc.timeout, &sc.dns).await?;
    probe::exchange(&mut o.conn, &t.request, t.template.is_head(), sc.timeout).await?;
    Ok(o)
}

pub(super) async fn tls_findings(
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

/// Streams sent at once on one connection: does the server take as many as it says?
pub(super) async fn concurrency_h2(
    sc: &Scenario,
    max: Option<u32>,
) -> Result<Concurrency, ProbeError> {
    let (head, body) = sc.targets[0].stream_request();
    let (head, body) = (head.clone(), body.map(<[u8]>::to_vec));
    let c = std::rc::Rc::new(
        probe::h2::open(&sc.origins[0], sc.tls.as_ref(), sc.timeout, &sc.dns).await?,
    );
    let tried = max.unwrap_or(CONCURRENCY_PROBE).clamp(1, CONCURRENCY_PROBE);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..tried {
        let c = c.clone();
        let (head, body) = (head.clone(), body.clone());
        let timeout = sc.timeout;
        set.spawn_local(async move { c.exchange((&head, body.as_deref()), timeout).await });
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
pub(super) async fn h2_findings(
    sc: &Scenario,
    max_req: u64,
    max_idle: Duration,
    steps: &Steps,
) -> H2Findings {
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
pub(super) async fn idle_probes(
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
pub(super) fn each_wait(sc: &Scenario) -> String {
    format!(
        "each wait at most {} s, --timeout",
        fmt_ms(secs(sc.timeout))
    )
}

/// The probes of a connection that is kept: requests per connection, then its idle
/// timeout; each a unit of `steps`.
pub(super) async fn kept_probes(
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
pub(super) async fn unless_interrupted<T>(
    probe: impl std::future::Future<Output = T>,
) -> Option<T> {
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
pub(super) async fn tls_part(
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
pub(super) fn advanced<T>(steps: &Steps, found: T) -> T {
    steps.advance();
    found
}

/// What the server asked of a client certificate in the probes' handshakes so far, and
/// (when it asked) how it answers one connection that sends none. None without TLS,
/// when the server asked nothing, or after Ctrl-C.
pub(super) async fn client_certificate(
    sc: &Scenario,
    req: &RequestConfig,
) -> Option<ClientCertPolicy> {
    if !sc.origins[0].tls || crate::interrupt::requested() {
        return None;
    }
    let asked = sc.client_certificate().filter(|c| c.requested > 0)?;
    let without = crate::net::client_auth::ClientAuth::default();
    let opts = tls::TlsOptions {
        alpn: vec![b"http/1.1".to_vec()],
        client_auth: without,
        ..req.tls.clone()
    };
    let refused = |e: String| WithoutCertificate::Refused { error: e };
    let without_certificate = match tls::client_config(&opts, false) {
        Err(e) => refused(format!("{e:#}")),
        Ok(cfg) => {
            let t = &sc.targets[0];
            let answer = async {
                let mut o = probe::open(&sc.origins[0], Some(&cfg), sc.timeout, &sc.dns).await?;
                probe::exchange(&mut o.conn, &t.request, t.template.is_head(), sc.timeout).await
            };
            match answer.await {
                Err(e) => refused(e.to_string()),
                Ok(x) if x.status >= 400 => WithoutCertificate::ErrorStatus { status: x.status },
                Ok(x) => WithoutCertificate::Served { status: x.status },
            }
        }
    };
    Some(ClientCertPolicy {
        asked,
        without_certificate,
    })
}
