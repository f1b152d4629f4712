//! `handshake compare`: one workload under several connection strategies, run in
//! alternating rounds (A B C, A B C, ...) so machine drift hits all alike; figures are
//! medians over the rounds with their spread, each strategy is set against the best of
//! its scheme, and the difference is explained in handshakes, milliseconds and round trips.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::engine;
use crate::plan::Scenario;
use crate::report::ScenarioReport;
use crate::server::RunningServer;
use crate::stats::{summary, Recorder};

/// One strategy against one URL (a row of the comparison).
pub struct Arm {
    pub name: String,
    /// Rows are compared within a group (the URL's scheme: http or https).
    pub group: String,
    pub scenario: Arc<Scenario>,
}

/// Median and range of one figure over the rounds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Spread {
                median: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

/// Figures of one run of one arm.
#[derive(Debug, Clone, Copy)]
struct RunFigures {
    time_per_request_ms: f64,
    wall_s: f64,
    requests_per_s: f64,
    mean_ms: f64,
    p99_ms: f64,
    opened: f64,
    tls_full: f64,
    tls_resumed: f64,
    setup_ms: f64,
    client_cpu_us: f64,
    server_cpu_us: Option<f64>,
    server_accepted: Option<u64>,
}

/// One row of the comparison table.
#[derive(Debug, Clone, Serialize)]
pub struct ComparisonRow {
    pub name: String,
    pub group: String,
    pub strategy: String,
    pub url: String,
    /// Time per request seen by one worker: concurrency × wall time / ok requests.
    pub time_per_request_ms: Spread,
    pub wall_s: Spread,
    pub requests_per_s: Spread,
    pub latency_mean_ms: Spread,
    pub latency_p99_ms: Spread,
    /// Per round.
    pub connections_opened: Spread,
    pub tls_full: Spread,
    pub tls_resumed: Spread,
    /// Mean dns + connect + tls of a new connection.
    pub setup_ms_per_new_connection: Spread,
    pub client_cpu_us_per_request: Spread,
    /// With the embedded server: its CPU per request, on its own threads.
    pub server_cpu_us_per_request: Option<Spread>,
    /// With the embedded server: connections it accepted over all rounds of this row.
    pub server_connections_accepted: Option<u64>,
    /// Median time per request / the best row's of the group.
    pub times_slower: f64,
    /// Median time per request minus the best row's, in ms.
    pub extra_ms_per_request: f64,
    pub best: bool,
}

/// The comparison block of the JSON report.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub rounds: usize,
    pub requests_per_round: Option<u64>,
    pub concurrency: usize,
    /// Round-trip time estimated per group: the median TCP connect time of the run.
    pub rtt_ms: Vec<GroupRtt>,
    pub rows: Vec<ComparisonRow>,
    pub explanations: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupRtt {
    pub group: String,
    pub rtt_ms: Option<f64>,
}

/// The result: one merged scenario report per arm, and the comparison.
pub struct CompareResult {
    pub scenarios: Vec<ScenarioReport>,
    pub comparison: Comparison,
}

fn figures(sc: &Scenario, rep: &ScenarioReport, server: Option<(f64, u64)>) -> RunFigures {
    let ok = rep.requests.ok.max(1) as f64;
    let new = &rep.phases_ms.new;
    let setup = if new.requests > 0 {
        new.dns.mean * new.dns.count as f64 / new.requests as f64 + new.connect.mean + new.tls.mean
    } else {
        0.0
    };
    RunFigures {
        time_per_request_ms: sc.concurrency as f64 * rep.duration_s * 1000.0 / ok,
        wall_s: rep.duration_s,
        requests_per_s: rep.throughput.requests_per_s,
        mean_ms: rep.latency_ms.mean,
        p99_ms: rep.latency_ms.p99,
        opened: rep.connections.opened as f64,
        tls_full: rep.connections.tls_handshakes.full as f64,
        tls_resumed: rep.connections.tls_handshakes.resumed as f64,
        setup_ms: setup,
        client_cpu_us: rep.cpu.client_us_per_request,
        server_cpu_us: server.map(|(cpu_s, _)| cpu_s * 1e6 / ok),
        server_accepted: server.map(|(_, n)| n),
    }
}

/// Run every arm `rounds` times, in turn.
pub fn run(
    arms: &[Arm],
    rounds: usize,
    server: Option<&RunningServer>,
) -> anyhow::Result<CompareResult> {
    let mut runs: Vec<Vec<RunFigures>> = vec![Vec::new(); arms.len()];
    let mut merged: Vec<(Recorder, Duration, crate::cpu::CpuTime)> = arms
        .iter()
        .map(|_| {
            (
                Recorder::new(),
                Duration::ZERO,
                crate::cpu::CpuTime::default(),
            )
        })
        .collect();
    let mut connect_p50: Vec<Vec<f64>> = vec![Vec::new(); arms.len()];
    for _ in 0..rounds {
        for (i, arm) in arms.iter().enumerate() {
            let before = server.map(|s| (s.stats.cpu_time(), s.snapshot().connections_accepted));
            let result = engine::run(arm.scenario.clone(), false)?;
            let after = server.map(|s| (s.stats.cpu_time(), s.snapshot().connections_accepted));
            let srv = match (before, after) {
                (Some((c0, a0)), Some((c1, a1))) => {
                    Some(((c1.saturating_sub(c0)).as_secs_f64(), a1 - a0))
                }
                _ => None,
            };
            let rep = summary::summarize(&arm.scenario, &result.recorder, result.wall, result.cpu);
            if rep.phases_ms.new.connect.count > 0 {
                connect_p50[i].push(rep.phases_ms.new.connect.p50);
            }
            runs[i].push(figures(&arm.scenario, &rep, srv));
            let m = &mut merged[i];
            m.0 += &result.recorder;
            m.1 += result.wall;
            m.2 = m.2 + result.cpu;
        }
    }
    let scenarios: Vec<ScenarioReport> = arms
        .iter()
        .zip(&merged)
        .map(|(arm, (rec, wall, cpu))| summary::summarize(&arm.scenario, rec, *wall, *cpu))
        .collect();

    let col = |i: usize, f: fn(&RunFigures) -> f64| {
        Spread::of(&runs[i].iter().map(f).collect::<Vec<_>>())
    };
    let mut rows: Vec<ComparisonRow> = arms
        .iter()
        .enumerate()
        .map(|(i, arm)| ComparisonRow {
            name: arm.name.clone(),
            group: arm.group.clone(),
            strategy: arm.scenario.strategy.name().to_string(),
            url: arm
                .scenario
                .targets
                .first()
                .map(|t| t.url.clone())
                .unwrap_or_default(),
            time_per_request_ms: col(i, |r| r.time_per_request_ms),
            wall_s: col(i, |r| r.wall_s),
            requests_per_s: col(i, |r| r.requests_per_s),
            latency_mean_ms: col(i, |r| r.mean_ms),
            latency_p99_ms: col(i, |r| r.p99_ms),
            connections_opened: col(i, |r| r.opened),
            tls_full: col(i, |r| r.tls_full),
            tls_resumed: col(i, |r| r.tls_resumed),
            setup_ms_per_new_connection: col(i, |r| r.setup_ms),
            client_cpu_us_per_request: col(i, |r| r.client_cpu_us),
            server_cpu_us_per_request: runs[i]
                .iter()
                .map(|r| r.server_cpu_us)
                .collect::<Option<Vec<f64>>>()
                .map(|v| Spread::of(&v)),
            server_connections_accepted: runs[i].iter().map(|r| r.server_accepted).sum(),
            times_slower: 1.0,
            extra_ms_per_request: 0.0,
            best: false,
        })
        .collect();

    let mut groups: Vec<String> = Vec::new();
    for a in arms {
        if !groups.contains(&a.group) {
            groups.push(a.group.clone());
        }
    }
    let mut rtts = Vec::new();
    let mut explanations = Vec::new();
    for g in &groups {
        let idx: Vec<usize> = (0..rows.len()).filter(|i| &rows[*i].group == g).collect();
        let Some(best) = idx.iter().copied().min_by(|a, b| {
            rows[*a]
                .time_per_request_ms
                .median
                .total_cmp(&rows[*b].time_per_request_ms.median)
        }) else {
            continue;
        };
        let best_t = rows[best].time_per_request_ms.median;
        for &i in &idx {
            let t = rows[i].time_per_request_ms.median;
            rows[i].times_slower = if best_t > 0.0 { t / best_t } else { 1.0 };
            rows[i].extra_ms_per_request = t - best_t;
            rows[i].best = i == best;
        }
        let all_connects: Vec<f64> = idx
            .iter()
            .flat_map(|i| connect_p50[*i].iter().copied())
            .collect();
        let rtt = (!all_connects.is_empty()).then(|| Spread::of(&all_connects).median);
        rtts.push(GroupRtt {
            group: g.clone(),
            rtt_ms: rtt,
        });
        for &i in &idx {
            if i != best {
                explanations.push(explain(
                    &rows[i],
                    &scenarios[i],
                    &rows[best],
                    &scenarios[best],
                    rtt,
                ));
            }
        }
    }
    let first = &arms[0].scenario;
    Ok(CompareResult {
        scenarios,
        comparison: Comparison {
            rounds,
            requests_per_round: first.stop.requests,
            concurrency: first.concurrency,
            rtt_ms: rtts,
            rows,
            explanations,
        },
    })
}

/// "2 TCP handshakes", "1 TCP handshake every 10 requests", ...
fn per_request(rate: f64, what: &str) -> Option<String> {
    if rate < 0.005 {
        return None;
    }
    let rounded = rate.round();
    Some(if (rate - rounded).abs() < 0.05 && rounded >= 1.0 {
        format!(
            "{} {}{}",
            rounded as u64,
            what,
            if rounded as u64 == 1 { "" } else { "s" }
        )
    } else if rate < 1.0 {
        format!("1 {} every {:.0} requests", what, 1.0 / rate)
    } else {
        format!("{rate:.2} {what}s")
    })
}

/// One plain sentence: which handshakes `r` pays per request that `best` does not, in
/// milliseconds and round trips.
fn explain(
    r: &ComparisonRow,
    rs: &ScenarioReport,
    best: &ComparisonRow,
    bs: &ScenarioReport,
    rtt: Option<f64>,
) -> String {
    let per = |s: &ScenarioReport, n: u64| n as f64 / s.requests.ok.max(1) as f64;
    let d_tcp = per(rs, rs.connections.opened) - per(bs, bs.connections.opened);
    let d_full =
        per(rs, rs.connections.tls_handshakes.full) - per(bs, bs.connections.tls_handshakes.full);
    let d_res = per(rs, rs.connections.tls_handshakes.resumed)
        - per(bs, bs.connections.tls_handshakes.resumed);
    let new = &rs.phases_ms.new;
    let tls13 = rs.connections.tls_handshakes.tls13 > 0;
    let version = if tls13 { "TLS 1.3" } else { "TLS 1.2" };
    let mut parts = Vec::new();
    if let Some(p) = per_request(d_tcp, "TCP handshake") {
        let ms = new.connect.mean;
        parts.push(match rtt {
            Some(rtt) if rtt > 0.0 => format!("{p} (~{:.1} RTT, {:.3} ms each)", ms / rtt, ms),
            _ => format!("{p} ({ms:.3} ms each)"),
        });
    }
    let tls_part = |rate: f64, kind: &str, rtts: f64| -> Option<String> {
        let p = per_request(rate, &format!("{kind} {version} handshake"))?;
        let ms = new.tls.mean;
        Some(match rtt {
            Some(rtt) if rtt > 0.0 => {
                let cpu = (ms - rtts * rtt).max(0.0);
                format!("{p} (~{rtts:.1} RTT + {cpu:.2} ms CPU, {ms:.3} ms each)")
            }
            _ => format!("{p} ({ms:.3} ms each)"),
        })
    };
    // Full handshakes: 1 round trip in TLS 1.3, 2 in TLS 1.2; resumed: 1.
    if let Some(p) = tls_part(d_full, "full", if tls13 { 1.0 } else { 2.0 }) {
        parts.push(p);
    }
    if let Some(p) = tls_part(d_res, "resumed", 1.0) {
        parts.push(p);
    }
    let cost = format!(
        "+{:.3} ms per request ({:.1}x the time of {})",
        r.extra_ms_per_request, r.times_slower, best.name
    );
    let server = match (
        &r.server_cpu_us_per_request,
        &best.server_cpu_us_per_request,
    ) {
        (Some(a), Some(b)) if a.median - b.median >= 0.5 => {
            format!(
                ", and the server spends {:.0} µs more CPU per request",
                a.median - b.median
            )
        }
        _ => String::new(),
    };
    let client =
        if r.client_cpu_us_per_request.median - best.client_cpu_us_per_request.median >= 0.5 {
            format!(
                "; the client spends {:.0} µs more CPU per request",
                r.client_cpu_us_per_request.median - best.client_cpu_us_per_request.median
            )
        } else {
            String::new()
        };
    if parts.is_empty() {
        format!(
            "{} opens no more connections than {}: {}{}{}.",
            r.name, best.name, cost, client, server
        )
    } else {
        format!(
            "{} pays {} per request more than {}: {}{}{}.",
            r.name,
            parts.join(" and "),
            best.name,
            cost,
            client,
            server
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_median_and_range() {
        assert_eq!(
            Spread::of(&[3.0, 1.0, 2.0]),
            Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(Spread::of(&[4.0, 1.0]).median, 2.5);
        assert_eq!(
            per_request(1.0, "TCP handshake").unwrap(),
            "1 TCP handshake"
        );
        assert_eq!(
            per_request(0.1, "TCP handshake").unwrap(),
            "1 TCP handshake every 10 requests"
        );
        assert_eq!(per_request(0.001, "TCP handshake"), None);
    }
}
