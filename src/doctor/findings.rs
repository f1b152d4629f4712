//! The doctor's findings: each probe's result judged, with its evidence and the
//! server's own fix where one applies.

use super::{flight, h3, kx};

use super::idle::{how_bounded, idle_evidence, idle_finding, judge_idle};
use super::policy::error_status;
use crate::fmt::ms as fmt_ms;
use crate::report::doctor::DoctorReport;
use crate::report::doctor::EarlyDataFinding;
use crate::report::doctor::H2Findings;
use crate::report::doctor::MaxRequests;
use crate::report::doctor::PersistProbe;
use crate::report::doctor::ServerKind;
use crate::report::doctor::TlsFindings;
use crate::report::doctor::{ClientCertPolicy, WithoutCertificate};
use crate::report::finding::Cause;
use crate::report::finding::Evidence;
use crate::report::finding::Finding;

use crate::report::cause::{NoEarlyData, NoResumption, ServerEnds};
use crate::report::fixes::{fix, Setting};

/// Below this many requests per connection, the limit is worth fixing.
const LOW_MAX_REQUESTS: u64 = 100;
/// HTTP/2: below this many concurrent streams a server throttles multiplexing clients
/// (browsers and gRPC expect ~100; nginx allows 128).
const LOW_CONCURRENT_STREAMS: u32 = 100;

/// The evidence of a requests-per-connection probe: the limit met (or the requests
/// probed without meeting one) on one connection.
pub(super) fn max_requests_evidence(m: &MaxRequests, figure: &str) -> Evidence {
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
pub(super) fn max_requests_finding(
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

pub(super) fn judge_h2(
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
        if let Some((range, safe)) = idle_finding(i, "HTTP/2 idle timeout", ends, findings) {
            let lo = fmt_ms(safe);
            let under = if i.varies {
                format!("well under {lo} s (a timer that ticks coarsely may end one before any probe saw)")
            } else {
                format!("under {lo} s")
            };
            problems.push(Finding::new("h2_idle_timeout_short", Cause::Reuse, format!(
                "The server ends idle HTTP/2 connections after {range} s ({}): a client that keeps its connection longer meets a GOAWAY and reconnects; keep the client's idle time {under}, or raise the server's {}.",
                how_bounded(i),
                fix(Setting::H2IdleTimeout, server)
            )).with(idle_evidence(i, "h2.idle_timeout")));
        }
    }
}

/// What the probes found, and the problems among it, in the order the report gives
/// them: the server, HTTP/1, its limits, TLS, HTTP/2, HTTP/3.
pub(super) fn judge(r: &DoctorReport) -> (Vec<Finding>, Vec<Finding>) {
    let mut findings = Vec::new();
    let mut problems = Vec::new();
    // Through a proxy, an http:// request's connection is the proxy's: the Server header
    // is the origin's, passed on, so no fix is named after it.
    let proxy_answers = r.proxy.is_some() && r.url.starts_with("http://");
    let server = r.server_kind.filter(|_| !proxy_answers);
    if let Some(p) = &r.proxy {
        findings.push(through_proxy(p, proxy_answers));
    }
    if let Some(h) = &r.server {
        findings.push(Finding::new(
            "server_says",
            Cause::Measured,
            format!(
                "The server says it is `{h}`{}.",
                if proxy_answers {
                    " (the origin's header, passed on by the proxy)"
                } else if server.is_some() {
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
        let said = r
            .http11
            .said
            .as_ref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        let fix = match r.client_certificate.as_ref().filter(|_| st == 400) {
            Some(c) => c.asked.cause_of_a_400().unwrap_or_default(),
            None => {
                "fix the request first (the URL's scheme and port, its path, -H headers)".into()
            }
        };
        problems.push(Finding::new("error_status", Cause::Status, format!(
            "The server answered the probes' request with {st}{said}: what it does with the connection after an error says nothing of its keep-alive for requests it serves, so none is claimed. {}, then run doctor again.", crate::fmt::capitalised(&fix)
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
    if let Some(c) = &r.client_certificate {
        findings.push(client_certificate(c));
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
    if proxy_answers {
        for f in findings.iter_mut().chain(problems.iter_mut()) {
            f.text = for_the_proxy(&f.text);
        }
    }
    (findings, problems)
}

/// A sentence about the connections probed, said of the proxy that answered them (an
/// http:// URL through a proxy): its subject, and a fix in the proxy's settings instead
/// of the web servers' directives.
fn for_the_proxy(text: &str) -> String {
    let mut t = text
        .replace("The server says", "The origin says")
        .replace("The server ", "The proxy ")
        .replace("the server ", "the proxy ")
        .replace("the server.", "the proxy.")
        .replace("The origin says", "The server says");
    if let Some(start) = t.find(" (nginx: ") {
        let mut depth = 0;
        let end = t[start + 1..].char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(start + 1 + i + 1)
        });
        if let Some(end) = end {
            t.replace_range(
                start..end,
                " (in the proxy's own settings: squid's client_persistent_connections and client_idle_pconn_timeout, for one)",
            );
        }
    }
    t
}

/// Whose connections the probes measured through the proxy `p`.
fn through_proxy(p: &str, proxy_answers: bool) -> Finding {
    let text = if proxy_answers {
        format!("Through the proxy {p}: an http:// request goes to the proxy, so the keep-alive, requests-per-connection and idle figures are the proxy's towards this client, not the origin's (its own connections to the origin are behind it, unseen). Run doctor without the proxy (--proxy \"\") to probe the origin.")
    } else {
        format!("Through the proxy {p}: each probe connection is a CONNECT tunnel to the origin, so the keep-alive, TLS and HTTP/2 figures are the origin's; the proxy holds a tunnel as long as its two ends keep it.")
    };
    Finding::new("through_proxy", Cause::Measured, text)
}

/// The HTTP/1.1, HTTP/1.0 and HTTP/1.0 keep-alive persistence probes, judged.
pub(super) fn judge_http1(
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
    } else if http11.close_delimited {
        // The framing ends the connection, whatever the server's keep-alive: the cause
        // and its fix are the response's length.
        findings.push(f("http11_close_delimited", Cause::Reuse, format!(
            "HTTP/1.1: each response's body ends with the connection (it answers {version} without Content-Length and not chunked)."
        )).with(persisted("http11", http11)));
        let e = ServerEnds::CloseDelimited;
        problems.push(f("close_delimited", Cause::Reuse, format!(
            "On every response {}: every request pays a new TCP (and TLS) handshake, whatever its keep-alive. {}.",
            e.why(),
            e.fix(server)
        )).with(persisted("http11", http11)));
    } else {
        // Said, or done without a word: a response that let the connection persist
        // and a connection the server closed anyway.
        let how = match http11.connection_header.as_deref() {
            Some(c) => format!(", Connection: {c}"),
            None if http11.persistent => ", and closes without `Connection: close`".to_string(),
            None => String::new(),
        };
        findings.push(f("http11_closed", Cause::Reuse, format!(
            "HTTP/1.1: the server ends the connection after each response (it answers {version}{how})."
        )).with(persisted("http11", http11)));
        let e = if version == "HTTP/1.0" {
            ServerEnds::Http10
        } else if http11.persistent {
            ServerEnds::Silently
        } else {
            ServerEnds::CloseHeader
        };
        problems.push(f("keep_alive_off", Cause::Reuse, format!(
            "The server closes HTTP/1.1 connections after every response (keep-alive is off): {}, and every request pays a new TCP (and TLS) handshake. {}.",
            e.why(),
            e.fix(server)
        )).with(persisted("http11", http11)));
    }
    // Kept: the connection carried a second request (a response that let it persist
    // says what the server meant, not what it did).
    findings.push(
        if http10.persistent && http10.reused {
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
pub(super) fn persisted(figure: &str, p: &PersistProbe) -> Evidence {
    Evidence::count(
        &format!("{figure}.reused"),
        u64::from(p.persistent && p.reused),
        1,
        "connections probed (a second request sent on it)",
    )
}

pub(super) fn judge_max_requests(
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

/// What the server asked of a client certificate, what the probes answered, and how it
/// answered a connection without one.
fn client_certificate(c: &ClientCertPolicy) -> Finding {
    let a = &c.asked;
    let cas = match a.acceptable_cas.as_slice() {
        [] => " and named no CA (any CA's may do)".to_string(),
        cas => format!(" and named the CAs it accepts: {}", cas.join("; ")),
    };
    let presented = match (a.presented, &a.subject, &a.key_type) {
        (0, ..) => "none was presented (no --cert)".to_string(),
        (p, Some(s), Some(k)) if p == a.requested => {
            format!("--cert was presented in each ({s}, {k})")
        }
        (p, ..) => format!("--cert was presented in {p}"),
    };
    let without = match &c.without_certificate {
        WithoutCertificate::Refused { error } => format!(
            "the connection failed ({error}): the server requires one and refuses in the handshake"
        ),
        WithoutCertificate::ErrorStatus { status } => format!(
            "the handshake completed and the request was answered {status}: the server requires one and says so after the handshake"
        ),
        WithoutCertificate::Served { status } => format!(
            "the request was served ({status}): the certificate is optional"
        ),
    };
    Finding::new(
        "client_certificate",
        Cause::Measured,
        format!("Client certificate: the server asked for one in the probes' full handshakes ({}){cas}; {presented}. On a connection without one, {without}.", a.requested),
    )
    .with(Evidence::count("client_certificate.requested", a.requested, a.requested, "the probes' full TLS handshakes"))
    .with(Evidence::count("client_certificate.presented", a.presented, a.requested, "the probes' full TLS handshakes"))
}

pub(super) fn judge_tls(
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
        None => {
            let cause = NoResumption::ServerGrantedNone {
                tries: super::probes::HANDSHAKE_SAMPLES as u64,
            };
            problems.push(
                f(cause.code(), Cause::Protocol, format!(
                    "No TLS session was resumed: {}; every new connection pays a full handshake ({} ms here). {}",
                    cause.why(),
                    fmt_ms(t.full_handshake_ms),
                    cause.fix(server)
                ))
                .with(full),
            );
        }
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
        // Early data is TLS 1.3's: under TLS 1.2 that comes first.
        Some(_) if t.version != "TLSv1.3" => {
            let cause = NoEarlyData::Tls12 { handshakes: 0 };
            findings.push(f(
                cause.code(),
                Cause::Protocol,
                format!(
                    "TLS 1.3 early data (0-RTT): not possible: {}; {}.",
                    cause.why(),
                    cause.fix(server).unwrap_or_default()
                ),
            ));
        }
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
    kx::judge(&t.key_exchange, t.version == "TLSv1.2", findings, problems);
}
