//! `trace`'s text report: the phases, a waterfall, the TLS details and what followed
//! each response.

use std::fmt::Write as _;

use crate::fmt::ms as fmt_ms;
use crate::record::Phase;
use crate::report::trace::{TraceReport, TraceStep};

/// The headline, then each request's waterfall and details, as text fitted to `width`.
pub(crate) fn render(t: &TraceReport, width: usize) -> String {
    let mut out = String::new();
    if let Some(h) = &t.headline {
        let _ = writeln!(out, "{}\n", h.text);
    }
    // The findings the headline does not already say.
    for f in &t.findings {
        if !matches!(&t.headline, Some(h) if h.code == f.code) {
            let _ = writeln!(out, "{}\n", f.text);
        }
    }
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
    for (i, s) in t.steps.iter().enumerate() {
        let said = t
            .status_examples
            .get(&s.status.to_string())
            .filter(|_| !t.steps[..i].iter().any(|e| e.status == s.status));
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
        waterfall(&mut out, s, width);
        details(&mut out, s);
        if let Some(m) = said {
            let _ = writeln!(out, "  Said        {m}");
        }
    }
    if let Some(e) = &t.error {
        let _ = writeln!(out, "\nFailed: {e}");
    }
    crate::fmt::fit(&out, width)
}

/// The step's phases as bars on one time scale, and its total.
fn waterfall(out: &mut String, s: &TraceStep, width: usize) {
    // Each phase with where its bar starts (None: where the one before it ended).
    // With 0-RTT the request leaves during the QUIC handshake: its bars overlap.
    let quic = s.quic.is_some();
    let proxied = s.proxy_connect_ms.is_some();
    let mut phases: Vec<(&str, Option<f64>, Option<f64>)> = Vec::new();
    for p in Phase::parts().filter(|p| *p != Phase::Blocked) {
        let shown = match p {
            Phase::Connect => !quic && !proxied,
            Phase::ProxyConnect => !quic && proxied,
            Phase::Tunnel => !quic && s.tunnel_ms.is_some(),
            Phase::Tls => !quic,
            Phase::H2Setup => !quic && s.stream_id.is_some(),
            Phase::QuicHandshake => quic,
            _ => true,
        };
        if !shown {
            continue;
        }
        let left = s.request_left_ms.filter(|_| p == Phase::Send);
        let from = left.map(|left| s.dns_ms.unwrap_or(0.0) + left);
        phases.push((p.label(), s.phase_ms(p), from));
        // HTTP/3's control stream and SETTINGS, after the handshake (not a phase of an
        // attempt: no round trip), unless the request left in 0-RTT before it.
        if p == Phase::QuicHandshake && s.request_left_ms.is_none() {
            phases.push(("h3_setup", s.h3_setup_ms, None));
        }
    }
    // "  name     12.345 ms |" before the bars.
    let width = width.saturating_sub(24).clamp(10, 50) as f64;
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
                let pad = ((at * scale).round() as usize).min(width as usize - 1);
                let len = ((v * scale).round() as usize).clamp(1, width as usize - pad);
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
}

/// The handshake's group, its HelloRetryRequest and its bytes: ", x25519, after a
/// HelloRetryRequest (a round trip more), ClientHello 1459 B, server's first flight
/// 2175 B".
fn wire_words(tls: &crate::report::trace::TlsInfo) -> String {
    let mut s = String::new();
    if let Some(g) = &tls.key_exchange {
        let _ = write!(s, ", {g}");
    }
    if tls.hello_retry_request == Some(true) {
        s.push_str(", after a HelloRetryRequest (a round trip more)");
    }
    if let Some(b) = tls.client_hello_bytes {
        let _ = write!(s, ", ClientHello {b} B");
    }
    if let Some(b) = tls.server_flight_bytes {
        let _ = write!(s, ", server's first flight {b} B");
    }
    s
}

/// The step's TLS, 0-RTT, QUIC and ticket details, the response and what followed it.
fn details(out: &mut String, s: &TraceStep) {
    if let Some(tls) = &s.tls {
        let _ = writeln!(
            out,
            "  TLS         {}{}, ALPN {}, {} handshake{}{}",
            tls.version,
            if s.quic.is_some() {
                " inside QUIC".to_string()
            } else {
                format!(" {}", tls.cipher_suite)
            },
            tls.alpn.as_deref().unwrap_or("none"),
            if tls.resumed { "resumed" } else { "full" },
            wire_words(tls),
            match s.early_data {
                Some("accepted") => "; the request went in early data (0-RTT), accepted: it was on its way during the handshake",
                Some("rejected") => "; the request went in early data (0-RTT), rejected: sent again after the handshake",
                Some(_) => "; no 0-RTT: no session to resume allows early data (none yet, or the server's tickets allow none)",
                None => "",
            }
        );
        if let Some(cc) = &tls.client_certificate {
            let _ = writeln!(
                out,
                "  Client cert the server asked for one in this handshake{}: {}",
                match cc.acceptable_cas.as_slice() {
                    [] => String::new(),
                    cas => format!(" (CAs it accepts: {})", cas.join("; ")),
                },
                if cc.presented {
                    "presented (--cert), and signed for"
                } else {
                    "none sent (give one with --cert FILE --key FILE)"
                }
            );
        }
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
