//! Human-readable reports, one file per report: a scenario's (`scenario`: bench's, and
//! each run of merge and compare), `compare`, the RTT `sweep`, the concurrency sweep
//! (`knee`), merge's agents (`merge`), `trace`, `doctor`, `audit`, `watch`; the shared
//! `table` (columns that leave by importance) and `sparkline`. Here: the layout, and
//! each kind of report with the lines every one ends with.

pub(crate) mod audit;
mod compare;
pub(crate) mod doctor;
mod knee;
mod lines;
mod merge;
mod scenario;
pub(crate) use scenario::outage_lines;
mod sparkline;
mod sweep;
mod table;
pub(crate) mod trace;
pub(crate) mod watch;

pub(crate) use compare::render_comparison;
pub(crate) use lines::Layout;
use lines::{link_line, server_line};
pub(crate) use scenario::render_scenario;
pub(crate) use sweep::render_sweep;

use std::fmt::Write as _;

use super::{Kind, Report};
use merge::render_agents;

/// The report as text, fitted to `layout`'s width.
pub(crate) fn render(report: &Report, layout: &Layout) -> String {
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
    match &report.kind {
        Kind::RttSweep { rtt_sweep } => {
            out.push_str(&render_sweep(rtt_sweep, layout));
            return out;
        }
        Kind::ConcurrencySweep { concurrency_sweep } => {
            out.push_str(&knee::render(concurrency_sweep, layout.width));
        }
        Kind::Comparison { comparison } => out.push_str(&render_comparison(comparison, layout)),
        Kind::Bench {} | Kind::Merged { .. } => {
            for (i, s) in report.scenarios.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                out.push_str(&render_scenario(s, layout.width));
            }
        }
    }
    if let Kind::Merged { agents, coverage } = &report.kind {
        render_agents(&mut out, agents);
        for f in coverage {
            out.push_str(&format!("\n{}\n", f.text));
        }
    }
    server_line(&mut out, report.server.as_ref());
    link_line(&mut out, report.link.as_ref());
    out
}
