//! `audit`'s text report.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::sparkline::{sparklines, Series};
use crate::report::audit::{AuditReport, ClientSummary};

/// "k1 n1, k2 n2": a map's entries in one line.
fn fmt_map(m: &BTreeMap<String, u64>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `--proxy-mode`: the tunnels and the plain requests that went through the audit.
fn proxy_lines(out: &mut String, s: &ClientSummary) {
    if let Some(p) = &s.proxy {
        let alpn = if p.alpn_offered.is_empty() {
            String::new()
        } else {
            format!("; ALPN offered: {}", fmt_map(&p.alpn_offered))
        };
        let _ = writeln!(
            out,
            "  CONNECT tunnels       {} ({}{alpn}), {} requests in them",
            p.tunnels,
            fmt_map(&p.tunnels_by_origin),
            p.tunneled_requests
        );
        let _ = writeln!(
            out,
            "  plain requests        {} ({})",
            p.plain_requests,
            fmt_map(&p.plain_by_origin)
        );
    }
}

/// One client's (or all clients') connections, requests and reuse.
fn client_block(out: &mut String, s: &ClientSummary, title: &str) {
    let _ = writeln!(out, "\n{title}");
    let _ = writeln!(out, "  connections           {}", s.connections);
    let estimated = s.proxy.as_ref().is_some_and(|p| p.requests_estimated);
    let _ = writeln!(
        out,
        "  requests              {} ({} answered){}",
        s.requests,
        s.responses,
        if estimated {
            "; in TLS tunnels estimated from the records"
        } else {
            ""
        }
    );
    let _ = writeln!(
        out,
        "  requests/connection   min {}  mean {:.1}  max {}   (reuse ratio {:.1} %)",
        s.requests_per_connection.min,
        s.requests_per_connection.mean,
        s.requests_per_connection.max,
        s.reuse_ratio * 100.0
    );
    proxy_lines(out, s);
    let _ = writeln!(out, "  HTTP versions         {}", fmt_map(&s.http_versions));
    let _ = writeln!(
        out,
        "  Connection headers    {}",
        fmt_map(&s.connection_headers)
    );
    if !s.status_codes.is_empty() {
        let _ = writeln!(out, "  status codes          {}", fmt_map(&s.status_codes));
    }
    for (code, own) in &s.answered_by_audit {
        let _ = writeln!(
            out,
            "  answered by the audit {} with {code}: {}",
            own.count, own.reason
        );
    }
    if s.forwarded_requests > 0 {
        let _ = writeln!(
            out,
            "  via a proxy           {} requests with Via, Forwarded, X-Forwarded-For or X-Real-IP",
            s.forwarded_requests
        );
    }
    if s.idle_gaps.count > 0 {
        let g = &s.idle_gaps;
        let _ = writeln!(
            out,
            "  idle gaps (ms)        min {:.2}  mean {:.2}  max {:.2}  ({})",
            g.min_ms, g.mean_ms, g.max_ms, g.count
        );
    }
    let endings: Vec<String> = s
        .endings
        .iter()
        .map(|(k, v)| {
            format!(
                "{} {v}",
                serde_json::to_value(k)
                    .ok()
                    .and_then(|x| x.as_str().map(String::from))
                    .unwrap_or_default()
            )
        })
        .collect();
    let _ = writeln!(out, "  how connections ended {}", endings.join(", "));
    if let Some(h) = &s.h2 {
        let _ = writeln!(
            out,
            "  HTTP/2                {} connection(s), {} streams (per connection min {}  mean {:.1}  max {}), peak {} at once on one connection",
            h.connections,
            h.streams,
            h.streams_per_connection.min,
            h.streams_per_connection.mean,
            h.streams_per_connection.max,
            h.peak_concurrent_streams
        );
    }
    if s.tls_handshakes.full + s.tls_handshakes.resumed > 0 {
        let _ = writeln!(
            out,
            "  TLS handshakes        full {}, resumed {}",
            s.tls_handshakes.full, s.tls_handshakes.resumed
        );
    }
    if let Some(c) = &s.client_certificates {
        client_certificates(out, c);
    }
}

/// With `--client-ca`: the client's certificates, handshake by handshake, and their
/// subjects.
fn client_certificates(out: &mut String, c: &crate::report::audit::ClientCertCounts) {
    let subjects: Vec<String> = c
        .subjects
        .iter()
        .map(|(k, n)| format!("{k} ({n})"))
        .collect();
    let _ = writeln!(
        out,
        "  Client certificates   presented {}, resumed {}, none {}, refused {}{}",
        c.presented,
        c.resumed,
        c.not_presented,
        c.refused,
        if subjects.is_empty() {
            String::new()
        } else {
            format!("; {}", subjects.join(", "))
        }
    );
}

/// The audit as text, its headline first, fitted to `width`.
pub(crate) fn render(r: &AuditReport, width: usize) -> String {
    let mut out = String::new();
    if let Some(i) = &r.interrupted {
        let _ = writeln!(out, "{}", i.text);
    }
    let _ = writeln!(out, "{}\n", r.headline.text);
    let _ = writeln!(out, "audit {}", r.url);
    if let Some(c) = &r.command {
        let _ = writeln!(
            out,
            "  command: {} (exit status {})",
            c.join(" "),
            r.exit_status.map_or("-".into(), |s| s.to_string())
        );
    }
    let _ = writeln!(
        out,
        "  peak concurrent connections: {}",
        r.peak_concurrent_connections
    );
    client_block(&mut out, &r.total, "All clients");
    for s in r.clients.iter().filter(|_| r.clients.len() > 1) {
        client_block(&mut out, s, &format!("Client {}", s.client));
    }
    for p in r.programs.iter().filter(|_| r.programs.len() > 1) {
        let title = format!("Program {} (from {})", p.program, p.clients.join(", "));
        client_block(&mut out, &p.figures, &title);
    }
    let t = &r.timeline;
    let mut series = vec![
        Series::rate("new conns/s", t, |b| b.new_connections),
        Series::rate("requests/s", t, |b| b.requests),
    ];
    if t.iter().any(|b| b.tls_full + b.tls_resumed > 0) {
        series.push(Series::rate("full TLS/s", t, |b| b.tls_full));
        series.push(Series::rate("resumed TLS/s", t, |b| b.tls_resumed));
    }
    let widths: Vec<f64> = t.iter().map(|b| b.width_s).collect();
    sparklines(&mut out, &widths, &series, width);
    let _ = writeln!(out, "\nVerdict");
    for v in &r.verdict {
        let _ = writeln!(out, "  {}", v.text);
    }
    crate::fmt::fit(&out, width)
}
