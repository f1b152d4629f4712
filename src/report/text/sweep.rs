//! `compare --rtt A,B,...`: each point's comparison, then time per request against RTT
//! per strategy as a table and a chart.

use std::fmt::Write as _;

use super::compare::render_comparison;
use super::lines::{link_line, server_line, Layout};
use crate::fmt::ms as fmt_ms;
use crate::report::comparison::RttSweep;

/// `compare --rtt A,B,...`: each point's comparison, then time per request against RTT
/// per strategy as a table and a chart.
pub(crate) fn render_sweep(sw: &RttSweep, layout: &Layout) -> String {
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
