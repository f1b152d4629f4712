//! merge's agents: one line each under the summed report, with their flags.

use std::fmt::Write as _;

use crate::fmt::ms as fmt_ms;

pub(super) fn render_agents(out: &mut String, agents: &[crate::report::AgentReport]) {
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
