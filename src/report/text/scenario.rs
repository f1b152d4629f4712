//! A scenario's report (bench's, and each of merge's and compare's runs): its heading
//! and summary, the ab-style "Connection Times (ms)" tables for new and reused
//! connections, latency percentiles, the connections block and the timeline.

use std::fmt::Write as _;

use super::lines::bytes;
use super::sparkline::{sparklines, Series};
use crate::fmt::{ms as fmt_ms, plural};
use crate::record::Phase;
use crate::report::{PhaseGroup, PhaseSummary, ScenarioReport, TimelineBucket};

/// One phase's row; `w`: the width of the names' column.
fn row(out: &mut String, name: &str, p: &PhaseSummary, w: usize) {
    if p.count == 0 {
        let _ = writeln!(
            out,
            "  {name:<w$} {:>8} {:>8} {:>8} {:>8} {:>8}",
            "-", "-", "-", "-", "-"
        );
    } else {
        let _ = writeln!(
            out,
            "  {name:<w$} {:>8} {:>8} {:>8} {:>8} {:>8}",
            fmt_ms(p.min),
            fmt_ms(p.mean),
            fmt_ms(p.stdev),
            fmt_ms(p.p50),
            fmt_ms(p.max)
        );
    }
}

fn connection_times(out: &mut String, title: &str, g: &PhaseGroup, with_blocked: bool) {
    let _ = writeln!(
        out,
        "\nConnection Times (ms), {title} ({} requests)",
        g.requests
    );
    if g.requests == 0 {
        let _ = writeln!(out, "  (none)");
        return;
    }
    // Every phase after `blocked` (and it with `with_blocked`), in report order; a phase
    // only some paths have, where a request had it.
    let shown: Vec<Phase> = Phase::ALL
        .into_iter()
        .filter(|p| *p != Phase::Blocked || with_blocked)
        .filter(|p| !p.only_on_some_paths() || g[*p].count > 0)
        .collect();
    // Names past 8 characters widen the first column to the longest name.
    let w = if shown.iter().any(|p| p.name().len() > 8) {
        Phase::ALL.iter().map(|p| p.name().len()).max().unwrap_or(8)
    } else {
        8
    };
    let _ = writeln!(
        out,
        "  {:<w$} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "", "min", "mean", "[+/-sd]", "median", "max"
    );
    for p in shown {
        row(out, p.name(), &g[p], w);
    }
}

/// The scenario's name, URL and load.
fn heading(out: &mut String, s: &ScenarioReport) {
    let _ = writeln!(out, "{}  {}", s.name, s.url);
    if s.urls > 1 {
        let _ = writeln!(out, "  ({} URLs, in turn)", s.urls);
    }
    let shared = s
        .connections
        .h2
        .as_ref()
        .map(|h| h.connections_per_origin)
        .or(s
            .connections
            .quic
            .as_ref()
            .and_then(|q| q.connections_per_origin));
    let mut load = match shared {
        Some(n) => format!(
            "  strategy {} ({}), {} workers sharing {} per origin",
            s.strategy,
            s.protocol,
            s.concurrency,
            plural(n as u64, "connection", "connections")
        ),
        None => format!(
            "  strategy {} ({}), {} connections/workers",
            s.strategy, s.protocol, s.concurrency
        ),
    };
    if let Some(r) = s.load.rate {
        let _ = write!(load, ", open loop at {r} requests/s");
    }
    if let Some(n) = s.load.requests_per_connection {
        let _ = write!(load, ", {n} requests per connection");
    }
    if let Some(r) = s.load.connect_rate {
        let _ = write!(load, ", new connections at most {r} a second");
    }
    let _ = writeln!(out, "{load}");
}

/// Requests, errors, status codes, throughput and CPU.
fn summary(out: &mut String, s: &ScenarioReport) {
    let r = &s.requests;
    let errors: u64 = r.errors.values().sum();
    let _ = writeln!(out, "\nSummary");
    let _ = writeln!(
        out,
        "  Requests      {} attempted, {} ok, {} with an error status, {} failed",
        r.attempted, r.ok, r.error_status, errors
    );
    if r.aborted_at_deadline > 0 {
        let _ = writeln!(
            out,
            "  Aborted       {} in flight at the deadline",
            r.aborted_at_deadline
        );
    }
    if s.load.rate.is_some() {
        let _ = writeln!(
            out,
            "  Late sends    {} (started 2 ms or more after their intended time)",
            r.late_sends
        );
    }
    let _ = writeln!(out, "  Duration      {:.3} s", s.duration_s);
    let _ = writeln!(out, "  Requests/s    {:.1}", s.throughput.requests_per_s);
    let _ = writeln!(
        out,
        "  Received      {} ({} of bodies)",
        bytes(s.throughput.bytes_received),
        bytes(s.throughput.body_bytes_received)
    );
    let codes: Vec<String> = r
        .status_codes
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    let classes = if r.answered == 0 {
        String::new()
    } else if r.non_2xx == 0 {
        " (all 2xx)".to_string()
    } else {
        let by: Vec<String> = r
            .status_classes
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        format!(
            " ({}; non-2xx {} of {})",
            by.join(", "),
            r.non_2xx,
            r.answered
        )
    };
    let _ = writeln!(
        out,
        "  Status codes  {}{classes}",
        if codes.is_empty() {
            "-".into()
        } else {
            codes.join(", ")
        }
    );
    let errs: Vec<String> = r
        .errors
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    if !errs.is_empty() {
        let _ = writeln!(out, "  Errors        {}", errs.join(", "));
    }
    if !r.error_details.is_empty() {
        let details: Vec<String> = r
            .error_details
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        let _ = writeln!(out, "  Error detail  {}", details.join(", "));
    }
    let _ = writeln!(
        out,
        "  Client CPU    {:.1} µs per request",
        s.cpu.client_us_per_request
    );
}

pub(crate) fn render_scenario(s: &ScenarioReport, width: usize) -> String {
    let mut out = String::new();
    if let Some(h) = &s.headline {
        let _ = writeln!(out, "{}\n", h.text);
    }
    let outages = outage_lines(&s.outages);
    for l in &outages {
        let _ = writeln!(out, "{l}");
    }
    if !outages.is_empty() {
        let _ = writeln!(out);
    }
    heading(&mut out, s);

    summary(&mut out, s);

    if s.requests.answered == 0 {
        // Nothing was measured: no table of zeros.
        let _ = writeln!(
            out,
            "\nLatency       none measured: no request was answered"
        );
    } else {
        latency_tables(&mut out, s);
    }
    connections_block(&mut out, s);
    timeline(&mut out, &s.timeline, width);
    if !s.diagnosis.is_empty() {
        let _ = writeln!(out, "\nDiagnosis");
        for d in &s.diagnosis {
            let _ = writeln!(out, "  {}", d.text);
        }
    }
    out
}

fn latency_tables(out: &mut String, s: &ScenarioReport) {
    let l = &s.latency_ms;
    let _ = writeln!(out, "\nLatency (ms)");
    let _ = writeln!(
        out,
        "  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  mean {}",
        fmt_ms(l.p50),
        fmt_ms(l.p90),
        fmt_ms(l.p99),
        fmt_ms(l.p999),
        fmt_ms(l.max),
        fmt_ms(l.mean)
    );

    // blocked: late sends in an open loop; for HTTP/2 also the wait for a stream slot.
    let open_loop = s.load.rate.is_some() || s.connections.h2.is_some();
    connection_times(out, "new connections", &s.phases_ms.new, open_loop);
    connection_times(out, "reused connections", &s.phases_ms.reused, open_loop);
}

/// HTTP/2's streams, SETTINGS and GOAWAYs; QUIC's handshakes, 0-RTT lead and path.
fn multiplexing(out: &mut String, c: &crate::report::ConnectionsReport) {
    if let Some(h) = &c.h2 {
        let _ = writeln!(
            out,
            "  concurrent streams    peak {} on one connection (mean peak {:.1})",
            h.peak_concurrent_streams.max, h.peak_concurrent_streams.mean
        );
        if let Some(st) = &h.server_settings {
            let show =
                |v: Option<u32>| v.map_or("unlimited/default".to_string(), |v| v.to_string());
            let _ = writeln!(
                out,
                "  server SETTINGS       max concurrent streams {}, initial window {}",
                show(st.max_concurrent_streams),
                st.initial_window_size.unwrap_or(65_535)
            );
        }
        if !h.goaway_codes.is_empty() {
            let codes: Vec<String> = h
                .goaway_codes
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            let _ = writeln!(out, "  GOAWAY codes          {}", codes.join(", "));
        }
    }
    if let Some(q) = &c.quic {
        if let Some(p) = &q.peak_concurrent_streams {
            let _ = writeln!(
                out,
                "  concurrent streams    peak {} on one connection (mean peak {:.1})",
                p.max, p.mean
            );
        }
        let _ = writeln!(
            out,
            "  QUIC handshake        min {:.3}  mean {:.3}  max {:.3} ms ({} connections){}",
            q.handshake_ms.min,
            q.handshake_ms.mean,
            q.handshake_ms.max,
            q.handshake_ms.count,
            match q.handshake_extra_round_trips {
                0 => String::new(),
                n => format!(
                    "; {} more in all: the server's first flight above the anti-amplification limit (3 times what the client had sent)",
                    crate::fmt::plural_s(n, "round trip")
                ),
            }
        );
        if let Some(l) = &q.early_request_lead_ms {
            let _ = writeln!(
                out,
                "  0-RTT lead            requests left {:.3} ms (mean) before the handshake completed",
                l.mean
            );
        }
        let _ = writeln!(
            out,
            "  QUIC path             RTT estimate mean {:.3} ms; {} packets sent, {} lost ({} bytes), {} congestion events",
            q.rtt_ms.mean, q.packets_sent, q.packets_lost, q.bytes_lost, q.congestion_events
        );
    }
}

/// `-L`: connections by origin and the redirects followed; `--local-addr`: by source
/// address.
fn redirect_lines(out: &mut String, s: &ScenarioReport) {
    if let Some(by) = &s.connections.by_origin {
        let each: Vec<String> = by.iter().map(|(o, n)| format!("{o} {n}")).collect();
        let _ = writeln!(out, "  by origin             {}", each.join(", "));
    }
    if let Some(by) = &s.connections.by_source_address {
        let line = if by.len() <= 8 {
            let each: Vec<String> = by.iter().map(|(a, n)| format!("{a} {n}")).collect();
            each.join(", ")
        } else {
            let (lo, hi) = by
                .values()
                .fold((u64::MAX, 0), |(lo, hi), n| (lo.min(*n), hi.max(*n)));
            format!("{} addresses, {lo} to {hi} connections each", by.len())
        };
        let _ = writeln!(out, "  from source address   {line}");
    }
    if let Some(n) = s.requests.redirects {
        let _ = writeln!(
            out,
            "  redirects followed    {n} of {} requests (each hop a request)",
            s.requests.attempted
        );
    }
}

fn connections_block(out: &mut String, s: &ScenarioReport) {
    let r = &s.requests;
    let c = &s.connections;
    let _ = writeln!(out, "\nConnections");
    match &c.proxy {
        Some(p) => {
            let _ = writeln!(
                out,
                "  opened                {} (to the proxy {})",
                c.opened, p.url
            );
            if p.tunnels > 0 {
                let _ = writeln!(
                    out,
                    "  CONNECT tunnels       {} (one per connection, to the origin through the proxy)",
                    p.tunnels
                );
            }
        }
        None => {
            let _ = writeln!(out, "  opened                {}", c.opened);
        }
    }
    redirect_lines(out, s);
    let _ = writeln!(
        out,
        "  reused requests       {} of {} answered (reuse ratio {:.1} %)",
        c.reused_requests,
        r.answered,
        c.reuse_ratio * 100.0
    );
    tls_lines(out, &c.tls_handshakes);
    if let Some(k) = &c.kernel {
        kernel_lines(out, k, &s.phases_ms.new[Phase::Connect]);
    }
    let ed = &c.early_data;
    if ed.attempted > 0 {
        let _ = writeln!(
            out,
            "  early data (0-RTT)    {} requests sent in it: {} accepted, {} rejected (sent again after the handshake)",
            ed.attempted, ed.accepted, ed.rejected
        );
    }
    let _ = writeln!(
        out,
        "  {}   min {}  mean {:.1}  max {}",
        if c.h2.is_some() {
            "streams/connection "
        } else {
            "requests/connection"
        },
        c.requests_per_connection.min,
        c.requests_per_connection.mean,
        c.requests_per_connection.max
    );
    multiplexing(out, c);
    let reasons: Vec<String> = c
        .close_reasons
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(
        out,
        "  close reasons         {}",
        if reasons.is_empty() {
            "-".into()
        } else {
            reasons.join(", ")
        }
    );
    if c.server_ignored_close > 0 {
        let _ = writeln!(out, "  server ignored close  {}", c.server_ignored_close);
    }
    if c.h2.is_some() {
        let _ = writeln!(out, "  refused-stream retries {}", r.retries.refused_stream);
    } else {
        let _ = writeln!(
            out,
            "  stale retries         {}",
            r.retries.stale_connection
        );
    }
    let d = &s.dns;
    if d.lookups + d.cache_hits + d.joined > 0 {
        let _ = writeln!(
            out,
            "  {:<22}{}, {}{}",
            format!("DNS (cache {})", d.cache),
            plural(d.lookups, "lookup", "lookups"),
            plural(d.cache_hits, "cache hit", "cache hits"),
            if d.joined > 0 {
                format!(", {} waited for a lookup under way", d.joined)
            } else {
                String::new()
            }
        );
    }
}

/// The TLS handshakes: full and resumed, their groups and HelloRetryRequests, and the
/// bytes of a full handshake's ClientHello and the server's first flight.
fn tls_lines(out: &mut String, th: &crate::report::TlsHandshakes) {
    let kx: Vec<String> = th
        .key_exchange
        .iter()
        .map(|(group, n)| format!("{group} {n}"))
        .collect();
    let _ = writeln!(
        out,
        "  TLS handshakes        full {}, resumed {}{}{}",
        th.full,
        th.resumed,
        if kx.is_empty() {
            String::new()
        } else {
            format!("; key exchange {}", kx.join(", "))
        },
        match th.hello_retry_requests {
            0 => String::new(),
            n => format!(
                "; {} (a round trip each)",
                crate::fmt::plural_s(n, "HelloRetryRequest")
            ),
        }
    );
    if let Some(cc) = &th.client_certificate {
        let _ = writeln!(
            out,
            "  Client certificate    {}",
            client_certificate_line(cc)
        );
    }
    if let (Some(hello), Some(flight)) = (th.client_hello_bytes, th.server_flight_bytes) {
        let _ = writeln!(
            out,
            "  TLS bytes (full)      ClientHello {:.0} B, the server's first flight {:.0} B (means){}",
            hello,
            flight,
            match th.first_flight_extra_round_trips {
                0 => String::new(),
                n => format!(
                    "; it waited {} in all: above the initial congestion window (~10 segments)",
                    crate::fmt::plural_s(n, "round trip")
                ),
            }
        );
    }
}

/// Mutual TLS in a line: how many handshakes the server asked for a certificate in, how
/// many the client answered with one (its subject and key), and the CAs it named.
fn client_certificate_line(cc: &crate::report::raw::ClientCertificate) -> String {
    let given = cc.named();
    let asked = match (cc.requested, cc.presented) {
        (0, _) => "no server asked for one; --cert was not sent".to_string(),
        (r, 0) => format!(
            "the server asked in {}, and none was sent (give one with --cert FILE --key FILE)",
            crate::fmt::plural_s(r, "handshake")
        ),
        (r, p) => format!(
            "asked in {}, presented in {p}{given}",
            crate::fmt::plural_s(r, "full handshake")
        ),
    };
    match cc.acceptable_cas.as_slice() {
        [] => asked,
        cas => format!("{asked}; CAs it accepts: {}", cas.join("; ")),
    }
}

/// The kernel's view (TCP_INFO): the least RTT per connection beside the connect phase,
/// the SYNs sent again, and at the connections' close their retransmits.
fn kernel_lines(
    out: &mut String,
    k: &crate::report::KernelReport,
    connect: &crate::report::PhaseSummary,
) {
    use crate::fmt::ms;
    if k.min_rtt_ms.count > 0 {
        let _ = writeln!(
            out,
            "  kernel RTT (TCP_INFO) least per connection p50 {} ms, p99 {} ms over {} (the connect phase: p50 {} ms, p99 {} ms); {} segments sent again, on {} of them",
            ms(k.min_rtt_ms.p50),
            ms(k.min_rtt_ms.p99),
            k.min_rtt_ms.count,
            ms(connect.p50),
            ms(connect.p99),
            k.retransmits,
            k.connections_with_retransmits
        );
    }
    if let Some(slow) = k.syn_retransmitted_connect_ms {
        let _ = writeln!(
            out,
            "  SYN sent again        on {} of {} connects ({} in all), which took {} ms on average",
            k.syn_retransmitted,
            k.connects,
            k.syn_retransmits,
            ms(slow.mean)
        );
    }
}

fn timeline(out: &mut String, t: &[TimelineBucket], width: usize) {
    let mut series = vec![
        Series::rate("requests/s", t, |b| b.requests),
        Series::rate("new conns/s", t, |b| b.new_connections),
    ];
    if t.iter().any(|b| b.errors > 0) {
        series.push(Series::rate("errors/s", t, |b| b.errors));
    }
    series.push(Series {
        name: "p99",
        unit: " ms",
        values: t.iter().map(|b| b.p99_ms.unwrap_or(0.0)).collect(),
        per_second: false,
    });
    let widths: Vec<f64> = t.iter().map(|b| b.width_s).collect();
    sparklines(out, &widths, &series, width);
}

/// At most this many outage windows are said one by one.
const OUTAGES_SAID: usize = 5;

/// A line for each window in which a hop could not be reached (the first five, then how
/// many more): when, how long, how its end is known, and what it cost.
pub(crate) fn outage_lines(o: &crate::report::OutagesReport) -> Vec<String> {
    use crate::fmt::plural_s;
    let mut lines: Vec<String> = o.restarts.iter().map(restart_line).collect();
    if o.count > 1 {
        lines.push(format!(
            "Could not reach the target {} times, {:.2} s in all (the longest {:.2} s), {} lost:",
            o.count,
            o.total_ms / 1e3,
            o.longest_ms / 1e3,
            plural_s(o.requests_lost, "request")
        ));
    }
    for w in o.windows.iter().take(OUTAGES_SAID) {
        let until = match w.end_s {
            Some(e) => format!(
                "to {e:.2} s (it answered again between {:.2} s and {e:.2} s)",
                w.last_failed_s
            ),
            None => "to the run's end, no connect succeeding after it".to_string(),
        };
        let mut cost = Vec::new();
        for (n, how) in [
            (w.connects_refused, "refused"),
            (w.connects_timed_out, "timed out"),
            (w.connects_other, "failed otherwise"),
        ] {
            if n > 0 {
                cost.push(format!("{} {how}", plural_s(n, "connect")));
            }
        }
        if w.lookups_failed > 0 {
            cost.push(format!(
                "{} of its name failed (its resolver)",
                plural_s(w.lookups_failed, "lookup")
            ));
        }
        cost.push(format!(
            "{} in flight failed",
            plural_s(w.failed_in_flight, "request")
        ));
        let lead = if o.count > 1 { "  " } else { "" };
        lines.push(format!(
            "{lead}Could not reach {} for {:.2} s, from {:.2} s into the run {until}: {}.",
            w.hop,
            w.duration_s,
            w.start_s,
            cost.join(", ")
        ));
    }
    if o.count > OUTAGES_SAID {
        lines.push(format!(
            "  ... and {} more (in --json: outages.windows)",
            o.count - OUTAGES_SAID
        ));
    }
    lines
}

/// A restart the run saw: when, how many connections ended, what became of their
/// requests, and whether the server refused new connections after.
fn restart_line(r: &crate::record::outage::Restart) -> String {
    use crate::fmt::plural_s;
    let after = match r.unreachable_for_s {
        Some(d) => format!("it then refused or did not answer new connections for {d:.2} s"),
        None => {
            "it kept accepting new connections (its listening socket stayed, as a reload's does)"
                .to_string()
        }
    };
    // What became of the requests on the connections it ended, each part said only
    // where it happened.
    let mut parts = Vec::new();
    if r.failed_in_flight > 0 {
        parts.push(format!(
            "{} in flight failed",
            plural_s(r.failed_in_flight, "request")
        ));
    }
    if r.closed_after_answer > 0 {
        parts.push(format!(
            "{} after their answer with Connection: close (before its own limit of requests)",
            plural_s(r.closed_after_answer, "connection")
        ));
    }
    if r.retried > 0 {
        parts.push(format!(
            "{} retried on new connections (idempotent, and no byte of the answer had come)",
            plural_s(r.retried, "request")
        ));
    }
    let (kind, tail) = if r.verdict == "hard" {
        ("A hard stop", String::new())
    } else {
        parts.push("none failed".to_string());
        (
            "A graceful restart",
            " A crash between two answers would look the same from here: the server's log holds every request counted ok.".to_string(),
        )
    };
    format!(
        "{kind} of {} at {:.2} s into the run: it ended {}: {}; {after}.{tail}",
        r.hop,
        r.at_s,
        plural_s(r.connections(), "connection"),
        parts.join(", "),
    )
}
