//! compare's report: the rows against each group's best, the table, the time bars and
//! the RTT line of each group.

use std::fmt::Write as _;

use super::lines::Layout;
use super::table::{Column, Table};
use crate::fmt::ms as fmt_ms;
use crate::report::comparison::{Comparison, ComparisonRow, Spread};

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
pub(crate) fn render_comparison(c: &Comparison, layout: &Layout) -> String {
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
        redirect_line(&mut out, &rows);
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

/// `-L`: the redirects each row followed in a round (median), its hops being requests.
fn redirect_line(out: &mut String, rows: &[&ComparisonRow]) {
    let each: Vec<String> = rows
        .iter()
        .filter_map(|r| {
            r.redirects
                .as_ref()
                .map(|s| format!("{} {}", r.name, count(s)))
        })
        .collect();
    if !each.is_empty() {
        let _ = writeln!(
            out,
            "redirects followed per round: {} (each hop a request of its own)",
            each.join(", ")
        );
    }
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
    let extra = if r.best || r.failed_rounds > 0 || r.no_success || r.feature_missing.is_some() {
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
    } else if let Some(what) = r.feature_missing {
        format!("not ranked: {what}")
    } else if r.best {
        "best".to_string()
    } else if r.times_slower_ci.is_none() {
        format!(
            "{:.2}x, too few rounds ({} of {})",
            r.times_slower,
            r.rounds_ms.len(),
            crate::report::comparison::MIN_ROUNDS_FOR_INTERVAL
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
        if let Some(what) = r.feature_missing {
            let _ = writeln!(
                out,
                "  {:<name_w$} not ranked ({what}): {} ms/request",
                r.name,
                fmt_ms(r.time_per_request_ms.median)
            );
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
