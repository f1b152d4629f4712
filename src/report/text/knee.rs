//! `compare -c 1,10,50,200` as text: per strategy a table of its steps (requests/s,
//! latency, each side's CPU and the growth from the step before), the knee and who is at
//! its limit; then each step's comparison of the strategies in one line.

use std::fmt::Write as _;

use super::table::{Column, Table};
use crate::fmt::ms as fmt_ms;
use crate::report::knee::{ConcurrencySweep, KneePoint};

pub(super) fn render(sw: &ConcurrencySweep, width: usize) -> String {
    let mut out = String::new();
    let rounds = sw.steps.first().map_or(0, |s| s.comparison.rounds);
    let _ = writeln!(
        out,
        "Concurrency sweep: {rounds} rounds, every step of every strategy once a round in random order; medians over the rounds. CPU is a share of one core (this machine has {}); growth is requests/s against the step before, paired over the rounds, with its 95 % interval.",
        crate::fmt::plural(sw.machine_cores as u64, "core", "cores")
    );
    if sw.server_cpu_from.is_none() {
        let _ = writeln!(
            out,
            "The server's CPU is not known: give --server-pid (its children are read too)."
        );
    }
    for s in &sw.series {
        let _ = writeln!(out, "\n{}", s.name);
        table(&s.points, s.knee, width, &mut out);
        let _ = writeln!(out, "{}", s.verdict.text);
    }
    out.push('\n');
    for step in &sw.steps {
        for h in &step.comparison.headline {
            let c = format!("c={}", step.concurrency);
            let h = h.text.replace(&format!("{c} "), "");
            // "No strategy costs..." reads on after the step as "no strategy costs...".
            let mut chars = h.chars();
            let h: String = match chars.next() {
                Some(first) if !h.starts_with("HTTP") => {
                    first.to_lowercase().chain(chars).collect()
                }
                _ => h.clone(),
            };
            let _ = writeln!(out, "At {c}: {h}");
        }
    }
    out
}

fn pct(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

fn table(points: &[KneePoint], knee: Option<usize>, width: usize, out: &mut String) {
    let mut t = Table::new(vec![
        Column::left("c"),
        Column::right("requests/s", 0),
        Column::right("p50 ms", 3),
        Column::right("p99 ms", 2),
        Column::right("client", 1),
        Column::right("server", 1),
        Column::right("machine", 4),
        Column::right("growth", 0),
    ]);
    for p in points {
        let growth = match &p.growth {
            None => String::new(),
            Some(g) => {
                let word = if g.grew {
                    "grew"
                } else if g.fell {
                    "fell"
                } else {
                    "same"
                };
                format!("{:.2}x {word}", g.ratio)
            }
        };
        let mark = if knee == Some(p.concurrency) {
            " knee"
        } else {
            ""
        };
        t.push(vec![
            format!("{}{mark}", p.concurrency),
            format!("{:.0}", p.requests_per_s.median),
            fmt_ms(p.latency_p50_ms.median),
            fmt_ms(p.latency_p99_ms.median),
            pct(p.client_cores.median),
            p.server_cores
                .as_ref()
                .map_or("-".to_string(), |s| pct(s.median)),
            p.machine_busy
                .as_ref()
                .map_or("-".to_string(), |s| pct(s.median)),
            growth,
        ]);
    }
    t.render(out, width);
}
