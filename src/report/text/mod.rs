//! Human-readable report: summary, latency percentiles, ab-style "Connection Times (ms)"
//! tables for new and reused connections, connections block, diagnosis.

pub mod audit;
pub mod doctor;
mod knee;
mod table;
pub mod trace;
pub mod watch;

use std::fmt::Write as _;

use super::comparison::{Comparison, ComparisonRow, RttSweep, Spread};
use super::{PhaseGroup, PhaseSummary, Report, ScenarioReport, TimelineBucket};
use crate::fmt::{ms as fmt_ms, plural};
use table::{Column, Table};

/// How a text report is laid out: the width its lines fit in, and whether the long
/// explanations go in (they are always in the JSON and the HTML).
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    pub width: usize,
    pub verbose: bool,
}

impl Layout {
    /// The width of `COLUMNS`, the terminal on stdout, or 80 (see [`crate::fmt::width`]).
    pub fn of_terminal(verbose: bool) -> Layout {
        Layout {
            width: crate::fmt::width(),
            verbose,
        }
    }
}

fn bytes(n: u64) -> String {
    let f = n as f64;
    if f >= 1e9 {
        format!("{:.2} GB", f / 1e9)
    } else if f >= 1e6 {
        format!("{:.2} MB", f / 1e6)
    } else if f >= 1e3 {
        format!("{:.1} kB", f / 1e3)
    } else {
        format!("{n} B")
    }
}

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
    let w = if g.quic_handshake.count > 0 { 14 } else { 8 };
    let _ = writeln!(
        out,
        "  {:<w$} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "", "min", "mean", "[+/-sd]", "median", "max"
    );
    if with_blocked {
        row(out, "blocked", &g.blocked, w);
    }
    // Every phase after `blocked`, in report order.
    for name in crate::record::PHASE_NAMES[1..].iter().copied() {
        if let Some(p) = g
            .get(name)
            .filter(|p| !matches!(name, "h2_setup" | "quic_handshake") || p.count > 0)
        {
            row(out, name, p, w);
        }
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
    let _ = writeln!(out, "{load}");
}

/// Requests, errors, status codes, throughput and CPU.
fn summary(out: &mut String, s: &ScenarioReport) {
    let r = &s.requests;
    let errors: u64 = r.errors.values().sum();
    let _ = writeln!(out, "\nSummary");
    let _ = writeln!(
        out,
        "  Requests      {} attempted, {} ok, {} errors",
        r.attempted, r.ok, errors
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
    let classes = if r.ok == 0 {
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
        format!(" ({}; non-2xx {} of {})", by.join(", "), r.non_2xx, r.ok)
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

pub fn render_scenario(s: &ScenarioReport, width: usize) -> String {
    let mut out = String::new();
    if let Some(h) = &s.headline {
        let _ = writeln!(out, "{}\n", h.text);
    }
    heading(&mut out, s);

    summary(&mut out, s);

    if s.requests.ok == 0 {
        // Nothing was measured: no table of zeros.
        let _ = writeln!(out, "\nLatency       none measured: no request succeeded");
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
fn multiplexing(out: &mut String, c: &super::ConnectionsReport) {
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

fn connections_block(out: &mut String, s: &ScenarioReport) {
    let r = &s.requests;
    let c = &s.connections;
    let _ = writeln!(out, "\nConnections");
    let _ = writeln!(out, "  opened                {}", c.opened);
    let _ = writeln!(
        out,
        "  reused requests       {} of {} ok (reuse ratio {:.1} %)",
        c.reused_requests,
        r.ok,
        c.reuse_ratio * 100.0
    );
    tls_lines(out, &c.tls_handshakes);
    if let Some(k) = &c.kernel {
        kernel_lines(out, k, &s.phases_ms.new.connect);
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

/// One line of a timeline: a value per bucket. `per_second`: counts, drawn as their rate
/// over the bucket; otherwise the highest value of a group of buckets is drawn.
pub struct Series<'a> {
    pub name: &'a str,
    pub unit: &'a str,
    pub values: Vec<f64>,
    pub per_second: bool,
}

impl<'a> Series<'a> {
    /// A count per bucket, drawn as a rate ("requests/s").
    pub fn rate<B>(name: &'a str, buckets: &[B], count: impl Fn(&B) -> u64) -> Series<'a> {
        Series {
            name,
            unit: "",
            values: buckets.iter().map(|b| count(b) as f64).collect(),
            per_second: true,
        }
    }
}

/// Timelines of 3 buckets or more (widths in s): one line per series, a character per
/// bucket (at most 60, and what `width` leaves room for; more buckets are drawn in
/// groups), scaled to the series' maximum.
/// A last bucket shorter than half the one before (the run ended just past a boundary)
/// is drawn with that one: a few events over a sliver of a second are no rate (one
/// request in 0.6 ms would read 1700/s in a run at 500/s).
pub fn sparklines(out: &mut String, widths: &[f64], series: &[Series], width: usize) {
    let (widths, series) = fold_sliver(widths, series);
    if widths.len() < 3 {
        return;
    }
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    // The name's column (2 + 16 + 1), the bars, then "| max 12345 ms" (at most 16).
    let room = width.saturating_sub(35).clamp(10, 60);
    let per = widths.len().div_ceil(room);
    let span: f64 = widths.iter().sum();
    let _ = writeln!(
        out,
        "\nTimeline ({} s per character, 0 to {} s; each line scaled to its own maximum)",
        crate::fmt::num(widths[0].max(1.0) * per as f64),
        fmt_ms(span)
    );
    for s in series {
        let v: Vec<f64> = s
            .values
            .chunks(per)
            .zip(widths.chunks(per))
            .map(|(v, w)| {
                if s.per_second {
                    let w: f64 = w.iter().sum();
                    if w > 0.0 {
                        v.iter().sum::<f64>() / w
                    } else {
                        0.0
                    }
                } else {
                    v.iter().copied().fold(0.0, f64::max)
                }
            })
            .collect();
        let max = v.iter().copied().fold(0.0_f64, f64::max);
        let bars: String = v
            .iter()
            .map(|&x| {
                if x <= 0.0 || max <= 0.0 {
                    ' '
                } else {
                    BARS[((x / max * 7.0).round() as usize).min(7)]
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "  {:<16}|{bars}| max {}{}",
            s.name,
            fmt_ms(max),
            s.unit
        );
    }
}

/// The timeline with a last bucket shorter than half the one before joined to it: its
/// width added, its counts added (its highest value kept, for a series of values).
fn fold_sliver<'a>(widths: &[f64], series: &[Series<'a>]) -> (Vec<f64>, Vec<Series<'a>>) {
    let mut widths = widths.to_vec();
    let mut series: Vec<Series> = series
        .iter()
        .map(|s| Series {
            values: s.values.clone(),
            ..*s
        })
        .collect();
    if let [.., before, last] = widths[..] {
        if last < before / 2.0 {
            widths.pop();
            *widths.last_mut().expect("two widths") += last;
            for s in &mut series {
                let last = s.values.pop().unwrap_or(0.0);
                if let Some(v) = s.values.last_mut() {
                    *v = if s.per_second { *v + last } else { v.max(last) };
                }
            }
        }
    }
    (widths, series)
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

/// A figure of a row that only means something where requests succeeded: "-" for a
/// failed row.
fn measured(r: &ComparisonRow, figure: String) -> String {
    if r.failed_rounds > 0 {
        "-".into()
    } else {
        figure
    }
}

fn count(s: &Spread) -> String {
    format!("{:.0}", s.median)
}

/// The headline, the comparison table (its least important columns left out when they do
/// not fit), a bar chart of time per request, and with `verbose` the explanations.
pub fn render_comparison(c: &Comparison, layout: &Layout) -> String {
    let mut out = String::new();
    for h in &c.headline {
        let _ = writeln!(out, "{}", h.text);
    }
    if !c.headline.is_empty() {
        out.push('\n');
    }
    let workload = match c.requests_per_round {
        Some(n) => format!("{n} requests"),
        None => "a fixed duration".to_string(),
    };
    let _ = writeln!(
        out,
        "Comparison: {workload} per round, {} worker{}, {} rounds in random order; medians [min-max] over the rounds",
        c.concurrency,
        if c.concurrency == 1 { "" } else { "s" },
        c.rounds
    );
    let _ = writeln!(
        out,
        "vs best: ratio of time per request, with its {:.0} % interval over the paired rounds; within ±{:.0} % is no difference",
        c.confidence * 100.0,
        c.noise_threshold * 100.0
    );
    let mut groups: Vec<&str> = Vec::new();
    for r in &c.rows {
        if !groups.contains(&r.group.as_str()) {
            groups.push(&r.group);
        }
    }
    for g in groups {
        let rows: Vec<&ComparisonRow> = c.rows.iter().filter(|r| r.group == g).collect();
        let url = rows.first().map(|r| r.url.as_str()).unwrap_or("");
        let _ = writeln!(out, "\n{url}{}", group_rtt(c, g));
        comparison_table(&rows).render(&mut out, layout.width);
        time_bars(&mut out, &rows, layout.width);
    }
    if !c.left_out.is_empty() {
        let _ = writeln!(out, "\nLeft out");
        for f in &c.left_out {
            let _ = writeln!(out, "  {}", f.text);
        }
    }
    if let Some(r) = c.rows.iter().find(|r| r.repeat_of.is_some()) {
        let _ = writeln!(
            out,
            "\nA/A run: {} is {} again. Two rows of one strategy differ only by the machine's noise, so a verdict between them shows how far the others can be trusted.",
            r.name,
            r.repeat_of.as_deref().unwrap_or("")
        );
    }
    if layout.verbose && !c.explanations.is_empty() {
        let _ = writeln!(out, "\nWhy");
        for e in &c.explanations {
            let _ = writeln!(out, "  {}", e.text);
        }
    } else if !c.explanations.is_empty() {
        let _ = writeln!(
            out,
            "\nWhy each row costs what it costs: -v, or the JSON and HTML reports."
        );
    }
    out
}

/// A group's rows as a table; at a narrow width the columns leave from the right of
/// this list: the time per request, the verdict against the best and the CPU stay.
fn comparison_table(rows: &[&ComparisonRow]) -> Table {
    let mut t = Table::new(vec![
        Column::left("strategy"),
        Column::right("ms/req", 0),
        Column::left("vs best"),
        Column::right("CPU µs cli/srv", 1),
        Column::right("conns/round", 2),
        Column::right("95 % interval", 3),
        Column::right("TLS full/res", 4),
        Column::right("p99 ms", 5),
        Column::right("+ms/req", 6),
        Column::right("req/s", 7),
        Column::right("setup ms", 8),
        Column::right("ms/req range", 9),
        Column::right("mean ms", 10),
        Column::right("wall s", 11),
    ]);
    for r in rows {
        let cpu = match &r.server_cpu_us_per_request {
            Some(s) => format!("{:.1}/{:.1}", r.client_cpu_us_per_request.median, s.median),
            None => format!("{:.1}/-", r.client_cpu_us_per_request.median),
        };
        let (verdict, interval, extra) = vs_best(r);
        let t_ms = &r.time_per_request_ms;
        t.push(vec![
            r.name.clone(),
            measured(r, fmt_ms(t_ms.median)),
            verdict,
            cpu,
            count(&r.connections_opened),
            interval,
            format!("{}/{}", count(&r.tls_full), count(&r.tls_resumed)),
            measured(r, fmt_ms(r.latency_p99_ms.median)),
            extra,
            measured(r, format!("{:.0}", r.requests_per_s.median)),
            if r.connections_opened.median > 0.0 {
                fmt_ms(r.setup_ms_per_new_connection.median)
            } else {
                "-".into()
            },
            measured(r, format!("{}-{}", fmt_ms(t_ms.min), fmt_ms(t_ms.max))),
            measured(r, fmt_ms(r.latency_mean_ms.median)),
            format!("{:.3}", r.wall_s.median),
        ]);
    }
    t
}

/// A row against the best, in three cells: the verdict in words ("2.63x slower",
/// "no difference", "best"), the ratio's interval, and the ms per request it adds.
fn vs_best(r: &ComparisonRow) -> (String, String, String) {
    let interval = r
        .times_slower_ci
        .filter(|_| !r.best)
        .map(|[lo, hi]| format!("{:.2}x [{lo:.2}-{hi:.2}]", r.times_slower))
        .unwrap_or_else(|| "-".into());
    let extra = if r.best || r.failed_rounds > 0 || r.no_success {
        "-".to_string()
    } else {
        let sign = if r.extra_ms_per_request >= 0.0 {
            "+"
        } else {
            ""
        };
        format!("{sign}{}", fmt_ms(r.extra_ms_per_request))
    };
    let verdict = if r.failed_rounds > 0 {
        format!(
            "failed in {} of {} rounds",
            r.failed_rounds,
            r.rounds_ms.len()
        )
    } else if r.no_success {
        "not ranked: every response an error".to_string()
    } else if r.best {
        "best".to_string()
    } else if r.times_slower_ci.is_none() {
        format!(
            "{:.2}x, too few rounds ({} of {})",
            r.times_slower,
            r.rounds_ms.len(),
            super::comparison::MIN_ROUNDS_FOR_INTERVAL
        )
    } else if r.significant {
        format!("{:.2}x slower", r.times_slower)
    } else {
        "no difference".to_string()
    };
    (verdict, interval, extra)
}

/// Horizontal bars of time per request, like the field reports' charts.
fn time_bars(out: &mut String, rows: &[&ComparisonRow], width: usize) {
    let name_w = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(8);
    // "  name " before the bar, " 12345 ms/request" after it.
    let room = width.saturating_sub(name_w + 20).clamp(10, 50) as f64;
    let max = rows
        .iter()
        .filter(|r| r.failed_rounds == 0)
        .map(|r| r.time_per_request_ms.median)
        .fold(0.0, f64::max);
    let _ = writeln!(out);
    for r in rows {
        if r.failed_rounds > 0 {
            let _ = writeln!(out, "  {:<name_w$} failed", r.name);
            continue;
        }
        if r.no_success {
            let _ = writeln!(out, "  {:<name_w$} not ranked (error answers)", r.name);
            continue;
        }
        let width = if max > 0.0 {
            (r.time_per_request_ms.median / max * room).round() as usize
        } else {
            0
        };
        let _ = writeln!(
            out,
            "  {:<name_w$} {} {} ms/request",
            r.name,
            "█".repeat(width.max(1)),
            fmt_ms(r.time_per_request_ms.median)
        );
    }
}

/// What the group's round trip is, after its URL: measured, set on a link, or none.
fn group_rtt(c: &Comparison, g: &str) -> String {
    let rtt = c
        .rtt_ms
        .iter()
        .find(|x| x.group == g)
        .and_then(|x| x.rtt_ms);
    let link = c.rtt_ms.iter().find(|x| x.group == g);
    match (rtt, link.is_some_and(|l| l.round_trips)) {
        (Some(r), true) => match link.and_then(|l| l.rtt_set_ms) {
            Some(set) => format!(
                "  (round trip {} ms, set on the link; the shortest TCP connects took {} ms)",
                fmt_ms(set),
                fmt_ms(r)
            ),
            None => format!("  (round trip {} ms: the shortest TCP connects)", fmt_ms(r)),
        },
        (Some(r), false) => format!(
            "  (the shortest TCP connects take {} ms here: local CPU and scheduling, not a network round trip)",
            fmt_ms(r)
        ),
        (None, _) => String::new(),
    }
}

/// The report as text, fitted to `layout`'s width.
pub fn render(report: &Report, layout: &Layout) -> String {
    crate::fmt::fit(&render_unfitted(report, layout), layout.width)
}

fn render_unfitted(report: &Report, layout: &Layout) -> String {
    let mut out = String::new();
    if let Some(i) = &report.interrupted {
        let _ = writeln!(out, "{}\n", i.text);
    }
    if let Some(l) = &report.link {
        let _ = writeln!(out, "Link: {}\n", l.describe());
    }
    if let Some(sw) = &report.rtt_sweep {
        out.push_str(&render_sweep(sw, layout));
        return out;
    }
    if let Some(sw) = &report.concurrency_sweep {
        out.push_str(&knee::render(sw, layout.width));
        server_line(&mut out, report.server.as_ref());
        link_line(&mut out, report.link.as_ref());
        return out;
    }
    if let Some(c) = &report.comparison {
        out.push_str(&render_comparison(c, layout));
        server_line(&mut out, report.server.as_ref());
        link_line(&mut out, report.link.as_ref());
        return out;
    }
    for (i, s) in report.scenarios.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&render_scenario(s, layout.width));
    }
    if let Some(agents) = &report.agents {
        render_agents(&mut out, agents);
    }
    server_line(&mut out, report.server.as_ref());
    link_line(&mut out, report.link.as_ref());
    out
}

fn render_agents(out: &mut String, agents: &[super::AgentReport]) {
    let _ = writeln!(
        out,
        "\nAgents ({}; the report above is their sum)",
        agents.len()
    );
    let _ = writeln!(
        out,
        "  {:<8} {:<20} {:<24} {:>9} {:>7} {:>7} {:>9} {:>8} {:>11}",
        "segment",
        "host",
        "started",
        "requests",
        "errors",
        "conns",
        "p99 ms",
        "wall s",
        "CPU µs/req"
    );
    for a in agents {
        let flags: Vec<&str> = a.flags.iter().map(|f| f.text.as_str()).collect();
        let _ = writeln!(
            out,
            "  {:<8} {:<20} {:<24} {:>9} {:>7} {:>7} {:>9} {:>8.3} {:>11.1}{}",
            a.segment.map_or("all".to_string(), |s| s.to_string()),
            a.host,
            a.started_at,
            a.requests,
            a.errors,
            a.connections,
            fmt_ms(a.p99_ms),
            a.wall_s,
            a.client_cpu_us_per_request,
            if flags.is_empty() {
                String::new()
            } else {
                format!("  <- {}", flags.join(", "))
            }
        );
    }
}

fn server_line(out: &mut String, srv: Option<&super::server::StatsSnapshot>) {
    if let Some(srv) = srv {
        let _ = writeln!(
            out,
            "\nEmbedded server: {} connections accepted, {} requests served",
            srv.connections_accepted, srv.requests
        );
    }
}

fn link_line(out: &mut String, link: Option<&super::link::LinkReport>) {
    if let Some(l) = link {
        let _ = writeln!(out, "Link: {}", l.describe_line());
    }
}

/// `compare --rtt A,B,...`: each point's comparison, then time per request against RTT
/// per strategy as a table and a chart.
pub fn render_sweep(sw: &RttSweep, layout: &Layout) -> String {
    let mut out = String::new();
    for p in &sw.points {
        let _ = writeln!(
            out,
            "=== RTT {} ms\nLink: {}\n",
            crate::fmt::num(p.rtt_set_ms),
            p.link.describe()
        );
        // Under the point's heading the RTT in each row's name says nothing new.
        let prefix = format!("{}ms ", crate::fmt::num(p.rtt_set_ms));
        let mut c = p.comparison.clone();
        for r in &mut c.rows {
            r.name = r.name.trim_start_matches(&prefix).to_string();
        }
        for f in c.explanations.iter_mut().chain(c.headline.iter_mut()) {
            f.text = f.text.replace(&prefix, "");
        }
        out.push_str(&render_comparison(&c, layout));
        server_line(&mut out, p.server.as_ref());
        link_line(&mut out, Some(&p.link));
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "=== Time per request (ms) against round-trip time (in round trips where the RTT is not 0)\n"
    );
    sweep_table(&mut out, sw, layout.width);
    out.push('\n');
    out.push_str(&sweep_chart(sw, layout.width));
    out
}

/// Time per request against RTT, a column per RTT; when the columns do not fit the
/// width, in several tables of as many as fit.
fn sweep_table(out: &mut String, sw: &RttSweep, width: usize) {
    let name_w = sw
        .series
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(8)
        .max(8);
    const CELL: usize = 16;
    let per_table = (width.saturating_sub(2 + name_w) / (CELL + 2)).max(1);
    let points: Vec<usize> = (0..sw.points.len()).collect();
    for (k, chunk) in points.chunks(per_table).enumerate() {
        if k > 0 {
            out.push('\n');
        }
        let _ = write!(out, "  {:name_w$}", "RTT");
        for &i in chunk {
            let rtt = format!("{} ms", crate::fmt::num(sw.points[i].rtt_set_ms));
            let _ = write!(out, "  {rtt:>CELL$}");
        }
        out.push('\n');
        for s in &sw.series {
            let _ = write!(out, "  {:name_w$}", s.name);
            for &i in chunk {
                let t = s.time_per_request_ms[i];
                let cell = match s.round_trips[i] {
                    Some(r) => format!("{} ({r:.1} RTT)", fmt_ms(t)),
                    None => fmt_ms(t),
                };
                let _ = write!(out, "  {cell:>CELL$}");
            }
            out.push('\n');
        }
    }
}

/// A terminal chart: RTT across, time per request up, one letter per strategy.
fn sweep_chart(sw: &RttSweep, width: usize) -> String {
    const H: usize = 16;
    let n = sw.points.len().max(1);
    // The axis' labels take 12 columns, the note after the RTTs 20.
    let col = (width.saturating_sub(12) / n).clamp(8, 16);
    let marks: Vec<char> = "abcdefghijklmnopqrstuvwxyz".chars().collect();
    let max = sw
        .series
        .iter()
        .flat_map(|s| s.time_per_request_ms.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let mut grid = vec![vec![' '; n * col]; H + 1];
    for (k, s) in sw.series.iter().enumerate() {
        let m = marks[k % marks.len()];
        for (i, t) in s.time_per_request_ms.iter().enumerate() {
            let y = H - ((t / max) * H as f64).round() as usize;
            // Strategies that land on one cell sit side by side, in their order.
            if let Some(x) = (i * col + 2..(i + 1) * col - 1).find(|x| grid[y][*x] == ' ') {
                grid[y][x] = m;
            }
        }
    }
    let mut out = String::new();
    for (row, cells) in grid.iter().enumerate() {
        let label = if row % 4 == 0 {
            fmt_ms(max * (H - row) as f64 / H as f64)
        } else {
            String::new()
        };
        let line: String = cells.iter().collect();
        let _ = writeln!(out, "  {label:>8} |{}", line.trim_end());
    }
    let _ = writeln!(out, "  {:>8} +{}", "ms", "-".repeat(n * col));
    let _ = write!(out, "  {:>8}  ", "");
    for p in &sw.points {
        let _ = write!(
            out,
            "{:^col$}",
            format!("{} ms", crate::fmt::num(p.rtt_set_ms))
        );
    }
    let _ = writeln!(out, "\n  {:>8}  RTT (not to scale)", "");
    for (k, s) in sw.series.iter().enumerate() {
        let _ = writeln!(out, "  {} = {}", marks[k % marks.len()], s.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(per_second: bool, values: &[f64]) -> Series<'static> {
        Series {
            name: if per_second { "requests/s" } else { "p99" },
            unit: if per_second { "" } else { " ms" },
            values: values.to_vec(),
            per_second,
        }
    }

    /// A last bucket of 0.6 ms holding one request is drawn with the second before (rate
    /// 501 over 1.0006 s, its p99 the higher of the two); a last bucket of 0.7 s keeps its
    /// own character and its rate over 0.7 s.
    #[test]
    fn a_last_sliver_is_drawn_with_the_bucket_before() {
        let mut out = String::new();
        sparklines(
            &mut out,
            &[1.0, 1.0, 1.0, 1.0, 0.0006],
            &[
                series(true, &[500.0, 500.0, 500.0, 500.0, 1.0]),
                series(false, &[0.1, 0.1, 0.1, 0.1, 0.3]),
            ],
            80,
        );
        assert!(out.contains("0 to 4.00 s"), "{out}");
        assert!(out.contains("requests/s      |████| max 501\n"), "{out}");
        assert!(
            out.contains("p99             |▃▃▃█| max 0.300 ms\n"),
            "{out}"
        );
        let mut out = String::new();
        sparklines(
            &mut out,
            &[1.0, 1.0, 0.7],
            &[series(true, &[500.0, 500.0, 350.0])],
            80,
        );
        assert!(out.contains("requests/s      |███| max 500\n"), "{out}");
    }
}
