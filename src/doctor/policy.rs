//! The doctor's headline: the server's reuse policy in one line, from the report's
//! figures, with the evidence each part rests on.

use crate::report::doctor::PersistProbe;

use crate::report::doctor::DoctorReport;
use crate::report::doctor::IdleTimeout;
use crate::report::finding::Cause;
use crate::report::finding::Evidence;
use crate::report::finding::Finding;

/// The server's connection policy in one line: keep-alive over HTTP/1.1 and 1.0, the
/// requests per connection, the idle timeout, TLS resumption and early data, HTTP/2's
/// streams and HTTP/3, as far as probed; with the probes' figures it was read from (the
/// idle timeout as its bounds).
pub(crate) fn policy(r: &DoctorReport) -> Finding {
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
        evidence.push(match i.bounds() {
            Some(bounds) => Evidence {
                bounds: Some(bounds),
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
    if let Some(c) = &r.client_certificate {
        parts.push(c.said());
        evidence.push(probe(
            "client_certificate.requested",
            c.asked.requested as f64,
        ));
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
    let whose = match &r.proxy {
        Some(p) if r.url.starts_with("http://") => {
            format!("Policy of the proxy {p} towards this client")
        }
        Some(_) => "Policy (the origin's, through the proxy's tunnel)".to_string(),
        None => "Policy".to_string(),
    };
    Finding::new(
        "policy",
        Cause::Measured,
        format!("{whose}: {}.", parts.join("; ")),
    )
    .with_all(evidence)
}

/// 1 for yes, 0 for no: a probe's answer as a figure.
pub(super) fn yes(b: bool) -> f64 {
    f64::from(u8::from(b))
}

/// A figure one of the probes read.
pub(super) fn probe(figure: &str, v: f64) -> Evidence {
    Evidence::figure(figure, v, None, "probe connections")
}

/// The policy's HTTP/1 parts: keep-alive over HTTP/1.1 and 1.0 (or the error the server
/// answered with instead), with the probes' figures.
pub(super) fn http1_policy(
    r: &DoctorReport,
    parts: &mut Vec<String>,
    evidence: &mut Vec<Evidence>,
) {
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

/// "idle timeout 3.0-3.1 s", "idle timeout 2.4-3.3 s, by when a connection went idle",
/// or "idle connections kept at least 2.0 s".
pub(super) fn idle_policy(i: &IdleTimeout) -> String {
    match (i.bounds(), i.varies) {
        (Some([lo, hi]), false) => format!("idle timeout {lo:.1}-{hi:.1} s"),
        (Some([lo, hi]), true) => {
            format!("idle timeout {lo:.1}-{hi:.1} s, by when a connection went idle")
        }
        (None, _) => format!("idle connections kept at least {:.1} s", i.at_least_s),
    }
}

/// The HTTP/1.1 probe's status when it was an error (4xx or 5xx).
pub(super) fn error_status(p: &PersistProbe) -> Option<u16> {
    p.status.filter(|s| *s >= 400)
}
