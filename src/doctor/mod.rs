//! The doctor: probes a server's reuse policy and gives a verdict with advice.
//! HTTP/1.1 persistence, HTTP/1.0 with and without `Connection: keep-alive`, the most
//! requests it serves on one connection, its idle timeout (parallel probes with
//! different idle waits, narrowed down), and over TLS: version, ALPN, resumption and
//! what a full and a resumed handshake cost, and the key exchange ([`kx`]). Where the server speaks HTTP/2 (ALPN h2,
//! or `--h2c`): its SETTINGS, the streams it serves on one connection (GOAWAY after N),
//! its idle timeout, and whether it takes many concurrent streams. Over https, HTTP/3
//! (`h3`): Alt-Svc, a QUIC handshake, QUIC resumption and 0-RTT.

use std::time::Duration;

mod findings;
pub(crate) mod flight;
pub(crate) mod h3;
mod idle;
pub(crate) mod kx;
mod policy;
mod probes;

use crate::plan::Scenario;
use crate::probe::Exchange;
use crate::proto::h1::{ConnectionHeader, HttpVersion};

use crate::plan::build::RequestConfig;
use crate::progress::Steps;
pub(crate) use crate::report::doctor::{DoctorReport, PersistProbe, ServerKind};
use crate::report::finding::{Cause, Finding};
use findings::judge;
pub(crate) use policy::policy;
use probes::{
    advanced, each_wait, h2_findings, kept_probes, persist_probe, tls_part, unless_interrupted,
};

/// The first request failed, so nothing about the server's policy could be probed: a
/// failed run (exit status 1), said with what to do about it where the failure is a
/// common mistake.
#[derive(Debug)]
pub(crate) struct Unreachable(pub String);

impl Unreachable {
    /// `url`'s first request failed with `why` (`key`) on the way to origin `o` (through
    /// its proxy, to its hop).
    fn new(url: &str, o: &crate::net::Origin, why: &str, key: Option<&str>) -> Unreachable {
        let proxy = o.proxy.as_ref().map(|p| p.display());
        let route = crate::report::failure::Route {
            proxy: proxy.as_deref(),
            hop: o.hop.as_deref(),
        };
        let mut line = format!("the first request to {url} failed: {why}");
        if let Some(h) = key.and_then(|k| crate::report::failure::hint(url, route, k, why)) {
            line.push_str(&format!(". Hint: {h}"));
        }
        Unreachable(line)
    }

    /// `sc`'s first request failed with `why` (`key`). A server that requires a client
    /// certificate may end the connection without an alert: where it asked for one and
    /// none was sent, that is the hint, not how the connection ended.
    fn first_request(sc: &Scenario, why: &str, key: Option<&str>) -> Unreachable {
        let url = &sc.targets[0].url;
        match sc.client_certificate() {
            Some(c) if c.presented < c.requested => Unreachable(format!(
                "the first request to {url} failed: {why}. Hint: {}",
                crate::report::failure::NO_CLIENT_CERTIFICATE
            )),
            _ => Unreachable::new(url, &sc.origins[0], why, key),
        }
    }
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// Probe everything and build the verdict.
pub(crate) async fn execute(
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
        let o = &sc.origins[0];
        if o.tls && o.proxy.is_none() && o.unix.is_none() && http11.tcp_unreachable {
            return h3_only(sc, http11, req, steps);
        }
        return Err(Unreachable::first_request(sc, e, http11.error_key).into());
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
    let client_certificate = probes::client_certificate(sc, req).await;

    // HTTP/2 where the server offers it (or --h2c asked for it on http://).
    let speaks_h2 = tls.as_ref().is_none_or(|t| t.offers_h2);
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
    // run the probes, this one waits. Not through a proxy or over a Unix socket, which
    // carry no UDP.
    let o = &sc.origins[0];
    let udp = o.proxy.is_none() && o.unix.is_none();
    let h3 = (o.tls && udp && !crate::interrupt::requested()).then(|| {
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
        proxy: sc.origins[0].proxy.as_ref().map(|p| p.display()),
        server_kind: ServerKind::recognise(server_header.as_deref()),
        server: server_header,
        http10: Some(http10),
        http10_keep_alive: Some(http10_keep_alive),
        max_requests,
        idle_timeout: idle,
        tls,
        client_certificate,
        h2,
        h3,
        ..DoctorReport::probed(&t.url, http11)
    };
    (report.findings, report.problems) = judge(&report);
    report.policy = policy(&report);
    Ok(report)
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
        // Reached only without a proxy (QUIC is not carried by one).
        return Err(Unreachable::new(url, &sc.origins[0], &why, tcp.error_key).into());
    }
    let mut findings = vec![Finding::new("h3_only", Cause::Transport, format!(
        "TCP: no connection ({why}); the server answers only over QUIC (HTTP/3). HTTP/1.x, HTTP/2 and TLS over TCP were not probed, and clients without HTTP/3 (most load tools, networks that block UDP) cannot reach it."
    ))];
    let mut problems = Vec::new();
    h3::judge(&h3, None, &mut findings, &mut problems);
    let mut report = DoctorReport {
        h3: Some(h3),
        findings,
        problems,
        ..DoctorReport::probed(url, tcp)
    };
    report.policy = policy(&report);
    Ok(report)
}
