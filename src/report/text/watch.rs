//! `watch`'s text report.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::report::watch::{EndpointSummary, WatchReport};

/// One server endpoint's (or all endpoints') connections, requests and endings.
fn endpoint_block(out: &mut String, e: &EndpointSummary) {
    let _ = writeln!(
        out,
        "\n{}",
        if e.endpoint == "all" {
            "All endpoints".to_string()
        } else {
            format!("Server {}", e.endpoint)
        }
    );
    let _ = writeln!(
        out,
        "  connections           {}{}",
        e.connections,
        if e.already_open > 0 {
            format!(" ({} already open when the watch began)", e.already_open)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "  requests              {} answered, {} unanswered{}",
        e.requests,
        e.unanswered_requests,
        if e.requests_estimated {
            "  [TLS: estimated from bursts of application data]"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  requests/connection   min {}  mean {:.1}  max {}   (reuse ratio {:.1} %)",
        e.requests_per_connection.min,
        e.requests_per_connection.mean,
        e.requests_per_connection.max,
        e.reuse_ratio * 100.0
    );
    let _ = writeln!(out, "  carried               {}", map(&e.kinds));
    if e.tls_handshakes.full + e.tls_handshakes.resumed > 0 {
        let _ = writeln!(
            out,
            "  TLS handshakes        full {}, resumed {}; versions {}; SNI {}; ALPN offered {}, chosen {}",
            e.tls_handshakes.full,
            e.tls_handshakes.resumed,
            map(&e.tls_versions),
            map(&e.tls_sni),
            map(&e.tls_alpn_offered),
            if e.tls_alpn.is_empty() {
                "(not visible in TLS 1.3)".to_string()
            } else {
                map(&e.tls_alpn)
            }
        );
    }
    if !e.status_codes.is_empty() {
        let _ = writeln!(out, "  status codes          {}", map(&e.status_codes));
    }
    let _ = writeln!(out, "  who closed first      {}", map(&e.endings));
    if e.lifetimes_ms.count == 0 {
        let _ = writeln!(out, "  lifetimes             none ended");
    } else {
        let _ = writeln!(out, "  TIME_WAIT at the end  {}", map(&e.time_wait));
        let _ = writeln!(
            out,
            "  lifetimes (ms)        min {:.2}  mean {:.2}  max {:.2}  ({} ended)",
            e.lifetimes_ms.min, e.lifetimes_ms.mean, e.lifetimes_ms.max, e.lifetimes_ms.count
        );
    }
    if e.idle_gaps.count > 0 {
        let _ = writeln!(
            out,
            "  idle gaps (ms)        min {:.2}  mean {:.2}  max {:.2}  ({})",
            e.idle_gaps.min_ms, e.idle_gaps.mean_ms, e.idle_gaps.max_ms, e.idle_gaps.count
        );
    }
}

/// The headline, what was watched, the figures and the verdict, fitted to `width`.
pub(crate) fn render(r: &WatchReport, width: usize) -> String {
    let mut out = String::new();
    if let Some(i) = &r.interrupted {
        let _ = writeln!(out, "{}", i.text);
    }
    let _ = writeln!(out, "{}\n", r.headline.text);
    let w = &r.watched;
    let what = match (&w.command, w.pid, w.port, &w.host) {
        (Some(c), _, _, _) => format!("command: {}", c.join(" ")),
        (None, Some(p), _, _) => format!("process {p}"),
        (None, None, Some(port), host) => format!(
            "connections to {}:{port}",
            host.as_deref().unwrap_or("any host")
        ),
        (None, None, None, Some(h)) => format!("connections to {h}"),
        _ => "every TCP connection on this machine".into(),
    };
    let _ = writeln!(out, "watch {what} for {:.1} s", w.duration_s);
    if let Some(s) = r.exit_status {
        let _ = writeln!(out, "  exit status {s}");
    }
    let _ = writeln!(
        out,
        "  capture: {} TCP packets, {} dropped by the kernel; peak concurrent connections {}",
        r.capture.packets, r.capture.kernel_drops, r.peak_concurrent_connections
    );
    if let Some(a) = r.capture.attribution {
        let _ = writeln!(
            out,
            "  the program's connections told from others' by {}",
            if a == "cgroup" {
                "its cgroup, in the kernel"
            } else {
                "looking up socket owners"
            }
        );
    }
    if let Some(o) = r.other_connections {
        let _ = writeln!(
            out,
            "  connections of other processes seen and left out: {o}"
        );
    }
    for e in std::iter::once(&r.total).chain(r.endpoints.iter().filter(|_| r.endpoints.len() > 1)) {
        endpoint_block(&mut out, e);
    }
    if r.programs.len() > 1 {
        let _ = writeln!(out, "\nBy client program");
        for p in &r.programs {
            let e = &p.figures;
            let _ = writeln!(
                out,
                "  {:<16} from {}: {} requests over {} connections (reuse ratio {:.1} %); who closed first {}",
                p.program,
                p.clients.join(", "),
                e.requests,
                e.connections,
                e.reuse_ratio * 100.0,
                map(&e.endings)
            );
        }
    }
    let _ = writeln!(out, "\nVerdict");
    for v in &r.verdict {
        let _ = writeln!(out, "  {}", v.text);
    }
    crate::fmt::fit(&out, width)
}

/// Counts by name, "-" when there are none.
fn map(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        "-".to_string()
    } else {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
