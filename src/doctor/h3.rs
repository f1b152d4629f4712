//! doctor over HTTP/3: whether an https:// server offers it (an `Alt-Svc: h3`
//! header on its HTTP/1.1 response, and a QUIC handshake that answers a request), what
//! a full and a resumed QUIC handshake cost, whether it resumes QUIC sessions, and
//! whether it takes a request in 0-RTT. Each probe is a short run of the HTTP/3 engine
//! (one request at a time), so what doctor reports is what `bench -s h3-*` measures.

use std::sync::Arc;
use std::time::Duration;

use crate::fmt::ms as fmt_ms;
use crate::plan::build::{self, RequestConfig};
use crate::plan::Strategy;
use crate::record::{ErrorDetail, ErrorKind, Phase};
use crate::report::cause::NoResumption;
use crate::report::finding::{Cause, Evidence, Finding};
use crate::stats::recorder::Recorder;

pub(crate) use crate::report::doctor::{EarlyDataFinding, H3Findings, ServerKind};
use crate::report::fixes::{fix, Setting};

/// A server that does not advertise HTTP/3 gets this long to answer a QUIC Initial.
const UNADVERTISED_WAIT: Duration = Duration::from_secs(2);
/// Handshakes per kind, for medians.
const SAMPLES: u64 = 5;
/// Requests the probes send at most, one at a time: the first, the full handshakes,
/// the resumed ones (with the one that gets a ticket and one more), and 0-RTT's three.
pub(crate) const PROBE_REQUESTS: u64 = 1 + SAMPLES + (SAMPLES + 2) + 3;

/// The port of the `h3` alternative in an `Alt-Svc` value (`h3=":443"`,
/// `h3="host:443"`; quoted, as RFC 7838 says), if it names one.
fn alt_svc_h3_port(value: &str) -> Option<u16> {
    value.split(',').find_map(|alt| {
        let (proto, rest) = alt.trim().split_once('=')?;
        if proto.trim() != "h3" {
            return None;
        }
        let authority = rest.split(';').next()?.trim().trim_matches('"');
        authority.rsplit_once(':')?.1.parse().ok()
    })
}

/// The median of a run's `quic_handshake` phase over its new connections.
fn handshake_median_ms(r: &Recorder) -> Option<f64> {
    let p = &r.phases_new[Phase::QuicHandshake];
    (p.count > 0).then(|| p.hist.value_at_quantile(0.5) as f64 / 1e6)
}

/// The most frequent error of a run, by category and detail.
fn main_error(r: &Recorder) -> Option<String> {
    let (kind, n) = ErrorKind::ALL
        .iter()
        .zip(r.errors.iter())
        .max_by_key(|(_, n)| **n)?;
    if *n == 0 {
        return None;
    }
    let detail = ErrorDetail::ALL
        .iter()
        .zip(r.error_details.iter())
        .filter(|(_, n)| **n > 0)
        .max_by_key(|(_, n)| **n)
        .map(|(d, _)| format!(" ({})", d.name()))
        .unwrap_or_default();
    Some(format!("{}{detail}", kind.name()))
}

/// Probe HTTP/3 at `url`'s host. Runs the engine on threads of its own (it blocks).
pub(crate) fn probe(
    url: &str,
    alt_svc: Option<String>,
    req: &RequestConfig,
    timeout: Duration,
) -> H3Findings {
    let advertised_port = alt_svc.as_deref().and_then(alt_svc_h3_port);
    let parsed = build::parse_url(url);
    let port = match &parsed {
        Ok(p) => advertised_port.unwrap_or(p.port),
        Err(_) => 0,
    };
    let target = match &parsed {
        Ok(p) if p.host.contains(':') => format!("https://[{}]:{port}{}", p.host, p.target),
        Ok(p) => format!("https://{}:{port}{}", p.host, p.target),
        Err(e) => e.0.clone(),
    };
    let mut f = H3Findings {
        alt_svc,
        advertised: advertised_port.is_some(),
        port,
        ..H3Findings::default()
    };
    // The user's request, sent to the HTTP/3 target.
    let req = match parsed.and_then(|_| build::parse_url(&target)) {
        Ok(p) => RequestConfig {
            urls: vec![(target.clone(), p)],
            ..req.clone()
        },
        Err(e) => {
            f.error = Some(e.0);
            return f;
        }
    };
    let mut totals = (0, 0, 0);
    let mut run = |strategy: Strategy, n: u64, wait: Duration| -> Result<Recorder, String> {
        let load = build::LoadConfig {
            redirects: None,
            task_per_worker: false,
            concurrency: 1,
            threads: 1,
            load: crate::plan::LoadShape::Closed,
            stop: crate::plan::StopWhen {
                requests: Some(n),
                duration: None,
            },
            timeout: wait,
            limits: Default::default(),
        };
        let sc = build::scenario(strategy.name(), strategy, None, &req, &load).map_err(|e| e.0)?;
        let r = crate::engine::run(Arc::new(sc), false)
            .map(|r| r.recorder)
            .map_err(|e| format!("{e:#}"))?;
        totals.0 += r.counts.connections_opened;
        totals.1 += r.counts.tls_resumed;
        totals.2 += r.counts.early_accepted;
        Ok(r)
    };
    'probes: {
        // Full handshakes; the first tells whether HTTP/3 is there at all.
        let first_wait = if f.advertised {
            timeout
        } else {
            timeout.min(UNADVERTISED_WAIT)
        };
        match run(Strategy::H3Close, 1, first_wait) {
            Ok(r) if r.counts.answered == 1 => f.answered = true,
            Ok(r) => {
                f.error = main_error(&r).or(Some("no answer".into()));
                break 'probes;
            }
            Err(e) => {
                f.error = Some(e);
                break 'probes;
            }
        }
        if let Ok(r) = run(Strategy::H3Close, SAMPLES, timeout) {
            f.full_handshake_ms = handshake_median_ms(&r);
        }
        // Resumption: the first connection gets a ticket, the others offer one. The one full
        // handshake among them is the slowest, so the median is a resumed one's.
        if let Ok(r) = run(Strategy::H3Resumed, SAMPLES + 2, timeout) {
            f.resume_tries = r.counts.connections_opened.saturating_sub(1);
            f.resumed = r.counts.tls_resumed;
            f.resumption = r.counts.tls_resumed > 0;
            if 2 * r.counts.tls_resumed > r.counts.connections_opened {
                f.resumed_handshake_ms = handshake_median_ms(&r);
            }
        }
        // 0-RTT: the first connection gets a ticket, the next sends its request in 0-RTT
        // if the ticket allows it.
        if f.resumption {
            if let Ok(r) = run(Strategy::H3ZeroRtt, 3, timeout) {
                f.early_data = Some(EarlyDataFinding {
                    offered: r.counts.early_attempted > 0,
                    accepted: r.counts.early_accepted > 0,
                });
            }
        }
    }
    (
        f.connections_opened,
        f.handshakes_resumed,
        f.early_data_accepted,
    ) = totals;
    f
}

/// The findings about HTTP/3, and its problems with their fixes.
pub(crate) fn judge(
    h: &H3Findings,
    server: Option<ServerKind>,
    findings: &mut Vec<Finding>,
    problems: &mut Vec<Finding>,
) {
    let port = h.port;
    let f = |code, cause, text| Finding::new(code, cause, text);
    match (h.advertised, h.answered) {
        (true, true) => findings.push(f("h3_answered", Cause::Measured, format!(
            "HTTP/3: advertised (Alt-Svc: {}) and answered over QUIC at UDP port {port}.",
            h.alt_svc.as_deref().unwrap_or_default()
        ))),
        (false, true) => findings.push(f("h3_not_advertised", Cause::Protocol, format!(
            "HTTP/3: answered over QUIC at UDP port {port}, but not advertised: without an `Alt-Svc: h3=\":{port}\"` header (or an HTTPS DNS record) browsers and curl never try it."
        ))),
        (true, false) => problems.push(f("h3_advertised_not_answered", Cause::Protocol, format!(
            "The server advertises HTTP/3 (Alt-Svc: {}) but no QUIC handshake completed at UDP port {port}: {}. Clients that follow Alt-Svc try QUIC first and fall back to TCP after a delay; open UDP {port} (firewall, load balancer) or stop advertising h3.",
            h.alt_svc.as_deref().unwrap_or_default(),
            h.error.as_deref().unwrap_or("no answer")
        ))),
        (false, false) => findings.push(f("h3_not_offered", Cause::Measured, format!(
            "HTTP/3: not offered (no Alt-Svc h3; no QUIC answer at UDP port {port}: {}).",
            h.error.as_deref().unwrap_or("no answer")
        ))),
    }
    if !h.answered {
        return;
    }
    let full_e = |full: f64| {
        Evidence::figure(
            "h3.full_handshake_ms",
            full,
            Some("ms"),
            "full QUIC handshakes (median)",
        )
    };
    if let Some(full) = h.full_handshake_ms {
        let mut found = f(
            "h3_handshake",
            Cause::Measured,
            format!(
                "QUIC handshake (transport and TLS 1.3 in one round trip): {} ms full{}.",
                fmt_ms(full),
                h.resumed_handshake_ms
                    .map(|r| format!(", {} ms resumed", fmt_ms(r)))
                    .unwrap_or_default()
            ),
        )
        .with(full_e(full));
        if let Some(r) = h.resumed_handshake_ms {
            found = found.with(Evidence::figure(
                "h3.resumed_handshake_ms",
                r,
                Some("ms"),
                "resumed QUIC handshakes (median)",
            ));
        }
        findings.push(found);
    }
    let resumed = Evidence::count(
        "h3.resumed",
        h.resumed,
        h.resume_tries,
        "new connections that offered a ticket",
    );
    if h.resumption {
        findings.push(
            f(
                "h3_resumption",
                Cause::Measured,
                format!(
                    "QUIC session resumption works: {} of {} new connections resumed the TLS session.",
                    h.resumed, h.resume_tries
                ),
            )
            .with(resumed),
        );
    } else {
        let cause = NoResumption::ServerGrantedNone {
            tries: h.resume_tries,
        };
        let mut p = f("h3_resumption_never_granted", Cause::Protocol, format!(
            "No QUIC session was resumed: {}; every new HTTP/3 connection pays a full TLS handshake{}. {}",
            cause.why(),
            h.full_handshake_ms
                .map(|f| format!(" ({} ms here)", fmt_ms(f)))
                .unwrap_or_default(),
            cause.fix(server)
        ))
        .with(resumed);
        if let Some(full) = h.full_handshake_ms {
            p = p.with(full_e(full));
        }
        problems.push(p);
    }
    early_data(h, server, findings);
}

/// What the 0-RTT probe found.
fn early_data(h: &H3Findings, server: Option<ServerKind>, findings: &mut Vec<Finding>) {
    let f = |code, cause, text| Finding::new(code, cause, text);
    match h.early_data {
        Some(EarlyDataFinding { accepted: true, .. }) => findings.push(f(
            "h3_early_data_accepted",
            Cause::Measured,
            "QUIC 0-RTT: accepted; a client's first request on a resumed QUIC connection goes with its Initial, with no round trip before it (idempotent requests only: 0-RTT can be replayed).".to_string(),
        )),
        Some(EarlyDataFinding { offered: true, .. }) => findings.push(f(
            "h3_early_data_rejected",
            Cause::Protocol,
            "QUIC 0-RTT: the server's ticket allowed it, but the server rejected the request sent in it (it was sent again after the handshake).".to_string(),
        )),
        Some(_) => findings.push(f(
            "h3_early_data_not_offered",
            Cause::Protocol,
            format!(
                "QUIC 0-RTT: not offered; the server's session tickets do not allow early data {}.",
                fix(Setting::EarlyData, server)
            ),
        )),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::alt_svc_h3_port;

    #[test]
    fn reads_the_h3_port_of_alt_svc() {
        assert_eq!(alt_svc_h3_port(r#"h3=":8443"; ma=86400"#), Some(8443));
        assert_eq!(
            alt_svc_h3_port(r#"h3-29=":1", h3="example.com:443"; ma=60, h2=":2""#),
            Some(443)
        );
        assert_eq!(alt_svc_h3_port(r#"h2=":443""#), None);
        assert_eq!(alt_svc_h3_port("clear"), None);
        assert_eq!(alt_svc_h3_port(r#"h3=":notaport""#), None);
    }
}
