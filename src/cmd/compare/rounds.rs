//! `handshake compare`: one workload under several connection strategies, run in
//! rounds, each in a new random order, so machine drift and position hit all alike; figures are medians over the rounds with their spread; each strategy is set
//! against the best of its scheme by a paired estimate over the rounds with a 95 %
//! confidence interval, a difference within the noise is called none, and a real one is
//! explained in handshakes, milliseconds, CPU and (on a real link) round trips.

use std::sync::Arc;
use std::time::Duration;

use crate::engine;
use crate::fmt::ms as fmt_ms;
use crate::plan::Scenario;
use crate::progress::Steps;
pub use crate::report::comparison::{
    Comparison, ComparisonRow, GroupRtt, RoundTrips, RttPoint, RttSeries, RttSweep, Spread,
};
use crate::report::ScenarioReport;
use crate::server::RunningServer;
use crate::stats::{paired, summary, Recorder};

/// Confidence of the intervals on "x slower" and "+ms per request".
pub const CONFIDENCE: f64 = 0.95;
/// A shortest TCP connect at least this long is a round trip worth counting; on loopback
/// a connect takes ~0.03-0.05 ms, all of it CPU and scheduling.
const MEANINGFUL_RTT_MS: f64 = 0.5;

/// One strategy against one URL (a row of the comparison).
pub struct Arm {
    pub name: String,
    /// Rows are compared within a group (the URL's scheme: http or https).
    pub group: String,
    pub scenario: Arc<Scenario>,
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
    /// Requests answered in the round: without any, its figures mean nothing.
    ok: u64,
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
        new.dns.mean * new.dns.count as f64 / new.requests as f64
            + new.connect.mean
            + new.tls.mean
            + new.h2_setup.mean
            + new.quic_handshake.mean
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
        ok: rep.requests.ok,
    }
}

/// "at 20 ms RTT: " when the rounds run across an emulated link.
fn steps_label(rtt_set_ms: Option<f64>) -> String {
    rtt_set_ms
        .map(|r| format!("at {} ms RTT: ", crate::fmt::num(r)))
        .unwrap_or_default()
}

/// Run every arm `rounds` times, in turn, in a new random order every round; each round
/// said on stderr (`steps`) with an estimate of the time to go.
pub fn run(
    arms: &[Arm],
    rounds: usize,
    server: Option<&RunningServer>,
    noise_threshold: f64,
    rtt_set_ms: Option<f64>,
    steps: &Steps,
) -> anyhow::Result<CompareResult> {
    let began = std::time::Instant::now();
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
    // The shortest TCP connect of each round: a round trip without queueing (under load
    // the median connect also waits in the server's accept queue).
    let mut connect_min: Vec<Vec<f64>> = vec![Vec::new(); arms.len()];
    // A new random order every round (Fisher-Yates from a xorshift seeded by the clock):
    // no strategy always runs first, or always after the one that warms or tires the
    // machine, so position effects become noise that the intervals account for.
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x9e37_79b9_7f4a_7c15, |d| d.as_nanos() as u64)
        | 1;
    let mut order: Vec<usize> = (0..arms.len()).collect();
    for round in 0..rounds {
        // The time to go is an estimate from the rounds so far; the first has none.
        let to_go = match round {
            0 => String::new(),
            r => format!(
                ", about {} s to go",
                fmt_ms(began.elapsed().as_secs_f64() / r as f64 * (rounds - r) as f64)
            ),
        };
        steps.say(&format!(
            "{}round {} of {rounds}: {} strategies{to_go}",
            steps_label(rtt_set_ms),
            round + 1,
            arms.len()
        ));
        for k in (1..order.len()).rev() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            order.swap(k, (seed % (k as u64 + 1)) as usize);
        }
        for &i in &order {
            let arm = &arms[i];
            let before = server.map(|s| (s.stats.cpu_time(), s.snapshot().connections_accepted));
            let result = engine::run(arm.scenario.clone(), false)?;
            let after = server.map(|s| (s.stats.cpu_time(), s.snapshot().connections_accepted));
            let srv = match (before, after) {
                (Some((c0, a0)), Some((c1, a1))) => {
                    Some(((c1.saturating_sub(c0)).as_secs_f64(), a1 - a0))
                }
                _ => None,
            };
            let rep = summary::summarize(
                &arm.scenario.shape(),
                &result.recorder,
                result.wall,
                result.cpu,
            );
            if rep.phases_ms.new.connect.count > 0 {
                connect_min[i].push(rep.phases_ms.new.connect.min);
            }
            runs[i].push(figures(&arm.scenario, &rep, srv));
            let m = &mut merged[i];
            // The strategy's rounds laid end to end on its timeline.
            m.0.add_after(&result.recorder, m.1);
            m.1 += result.wall;
            m.2 = m.2 + result.cpu;
        }
    }
    let scenarios: Vec<ScenarioReport> = arms
        .iter()
        .zip(&merged)
        .map(|(arm, (rec, wall, cpu))| {
            summary::summarize_with_raw(&arm.scenario.shape(), rec, *wall, *cpu)
        })
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
            rounds_ms: runs[i].iter().map(|r| r.time_per_request_ms).collect(),
            failed_rounds: runs[i].iter().filter(|r| r.ok == 0).count(),
            times_slower: 1.0,
            times_slower_ci: None,
            extra_ms_per_request: 0.0,
            extra_ms_per_request_ci: None,
            significant: false,
            best: false,
            repeat_of: arms[..i]
                .iter()
                .find(|a| a.group == arm.group && a.scenario.strategy == arm.scenario.strategy)
                .map(|a| a.name.clone()),
            round_trips: None,
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
        // A row with a round in which no request succeeded is not ranked: its time per
        // request is undefined there.
        for &i in idx.iter().filter(|i| rows[**i].failed_rounds > 0) {
            explanations.push(failed_explanation(&rows[i], &scenarios[i], rounds));
        }
        let ranked: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|i| rows[*i].failed_rounds == 0)
            .collect();
        let Some(best) = ranked.iter().copied().min_by(|a, b| {
            rows[*a]
                .time_per_request_ms
                .median
                .total_cmp(&rows[*b].time_per_request_ms.median)
        }) else {
            continue;
        };
        for &i in &ranked {
            versus_best(&mut rows, i, best, noise_threshold);
        }
        let all_connects: Vec<f64> = idx
            .iter()
            .flat_map(|i| connect_min[*i].iter().copied())
            .collect();
        let rtt = (!all_connects.is_empty()).then(|| Spread::of(&all_connects).median);
        // A loopback target has no network round trip: its connects are CPU and, under
        // load, accept-queue waiting.
        let loopback = idx.iter().all(|i| {
            arms[*i].scenario.origins.iter().all(|o| {
                o.host == "localhost"
                    || o.fixed_addrs
                        .as_ref()
                        .is_some_and(|a| a.iter().all(|x| x.ip().is_loopback()))
            })
        });
        // Across the lab's link the round trip is the one set: exact, not estimated.
        let (round_trips, counted) = match rtt_set_ms {
            Some(set) => (set >= MEANINGFUL_RTT_MS, Some(set)),
            None => (
                !loopback && rtt.is_some_and(|r| r >= MEANINGFUL_RTT_MS),
                rtt,
            ),
        };
        rtts.push(GroupRtt {
            group: g.clone(),
            rtt_set_ms,
            rtt_ms: rtt,
            round_trips,
        });
        if let Some(rtt) = counted.filter(|_| round_trips) {
            for &i in &idx {
                rows[i].round_trips = counted_round_trips(&scenarios[i]).map(|c| RoundTrips {
                    counted: c,
                    measured: rows[i].time_per_request_ms.median / rtt,
                });
            }
            if let Some(line) = round_trips_line(g, &rows, &idx, rtt) {
                explanations.push(line);
            }
        }
        for &i in &ranked {
            if i != best {
                explanations.push(explain(
                    &rows[i],
                    &scenarios[i],
                    &rows[best],
                    &scenarios[best],
                    counted.filter(|_| round_trips),
                    noise_threshold,
                ));
            }
        }
    }
    let first = &arms[0].scenario;
    Ok(CompareResult {
        scenarios,
        comparison: Comparison {
            rounds,
            method: "rounds in a new random order each; per row against the group's best (lowest median time per request): Hodges-Lehmann estimate of the paired per-round ratio and difference, 95 % interval from the Wilcoxon signed-rank test",
            confidence: CONFIDENCE,
            noise_threshold,
            requests_per_round: first.stop.requests,
            concurrency: first.concurrency,
            rtt_ms: rtts,
            rows,
            explanations,
        },
    })
}

/// A row that did not succeed in every round: in how many no request succeeded, and the
/// leading error with its message and hint.
fn failed_explanation(r: &ComparisonRow, rs: &ScenarioReport, rounds: usize) -> String {
    let when = if r.failed_rounds == rounds {
        "no request succeeded in any round".to_string()
    } else {
        format!(
            "no request succeeded in {} of {rounds} rounds",
            r.failed_rounds
        )
    };
    let why = crate::report::failure::leading_sentence(rs)
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    format!("{}: failed, not ranked: {when}.{why}", r.name)
}

/// Round trips per request, counted from what the run did (see [`RoundTrips`]).
fn counted_round_trips(s: &ScenarioReport) -> Option<f64> {
    let ok = s.requests.ok;
    if ok == 0 {
        return None;
    }
    let c = &s.connections;
    let hs = &c.tls_handshakes;
    let tls = if s.protocol == "h3" {
        // Counted with the QUIC handshake, one per connection opened.
        0
    } else if hs.tls13 > 0 {
        hs.full + hs.resumed
    } else {
        2 * hs.full + hs.resumed
    };
    let before = (c.opened + tls).saturating_sub(c.early_data.accepted);
    Some(1.0 + before as f64 / ok as f64)
}

/// One sentence per group on a real link: each row's round trips per request, counted
/// and measured, and how many each saves against the row that spends the most.
fn round_trips_line(
    group: &str,
    rows: &[ComparisonRow],
    idx: &[usize],
    rtt: f64,
) -> Option<String> {
    let with: Vec<(&ComparisonRow, RoundTrips)> = idx
        .iter()
        .filter_map(|&i| rows[i].round_trips.map(|r| (&rows[i], r)))
        .collect();
    let (most, top) = with
        .iter()
        .max_by(|a, b| a.1.counted.total_cmp(&b.1.counted))
        .copied()?;
    let each: Vec<String> = with
        .iter()
        .map(|(r, t)| format!("{} {:.2} [{:.2}]", r.name, t.counted, t.measured))
        .collect();
    let saves: Vec<String> = with
        .iter()
        .filter(|(r, t)| r.name != most.name && top.counted - t.counted >= 0.05)
        .map(|(r, t)| {
            format!(
                "{} saves {:.2} [{:.2}]",
                r.name,
                top.counted - t.counted,
                top.measured - t.measured
            )
        })
        .collect();
    let mut line = format!(
        "Round trips per request over {group} at {} ms, counted from the handshakes [measured: time per request / RTT]: {} (a request takes 1; before it, on a new connection, a TCP connect 1, a TLS 1.3 handshake 1 (TLS 1.2: 2, resumed 1), a QUIC handshake 1 with its TLS inside, and none that a request sent in 0-RTT waits for).",
        fmt_ms(rtt),
        each.join(", ")
    );
    if !saves.is_empty() {
        line.push_str(&format!(" Against {}: {}.", most.name, saves.join(", ")));
    }
    Some(line)
}

/// Set row `i` against row `best`: rounds are paired by index (they ran next to each
/// other), the ratio is estimated on log times so that it is symmetric.
fn versus_best(rows: &mut [ComparisonRow], i: usize, best: usize, noise_threshold: f64) {
    let r = &rows[i];
    if i == best {
        rows[i].best = true;
        rows[i].times_slower_ci = Some([1.0, 1.0]);
        rows[i].extra_ms_per_request_ci = Some([0.0, 0.0]);
        return;
    }
    let pairs: Vec<(f64, f64)> = r
        .rounds_ms
        .iter()
        .zip(&rows[best].rounds_ms)
        .map(|(a, b)| (*a, *b))
        .filter(|(a, b)| *a > 0.0 && *b > 0.0)
        .collect();
    let logs: Vec<f64> = pairs.iter().map(|(a, b)| (a / b).ln()).collect();
    let diffs: Vec<f64> = pairs.iter().map(|(a, b)| a - b).collect();
    let ratio = paired::hodges_lehmann(&logs, CONFIDENCE);
    let extra = paired::hodges_lehmann(&diffs, CONFIDENCE);
    let row = &mut rows[i];
    if let Some(e) = ratio {
        row.times_slower = e.center.exp();
        row.times_slower_ci = e.interval.map(|(lo, hi)| [lo.exp(), hi.exp()]);
    }
    if let Some(e) = extra {
        row.extra_ms_per_request = e.center;
        row.extra_ms_per_request_ci = e.interval.map(|(lo, hi)| [lo, hi]);
    }
    // A verdict needs both intervals: the ratio's beyond the noise threshold and the
    // difference's clear of 0, on the same side (the two estimates can disagree near
    // the edge).
    let slower = row
        .times_slower_ci
        .is_some_and(|[lo, _]| lo > 1.0 + noise_threshold)
        && row.extra_ms_per_request_ci.is_some_and(|[lo, _]| lo > 0.0);
    let faster = row
        .times_slower_ci
        .is_some_and(|[_, hi]| hi < 1.0 / (1.0 + noise_threshold))
        && row.extra_ms_per_request_ci.is_some_and(|[_, hi]| hi < 0.0);
    row.significant = slower || faster;
}

/// How often something happens per request: "for every request", "2 per request",
/// "for 1 in 10 requests".
fn how_often(per_request: f64) -> Option<String> {
    if per_request < 0.005 {
        return None;
    }
    let rounded = per_request.round();
    if rounded >= 1.0 && (per_request - rounded).abs() < 0.05 {
        return Some(if rounded == 1.0 {
            "for every request".to_string()
        } else {
            format!("{rounded:.0} per request")
        });
    }
    if per_request < 1.0 {
        let every = (1.0 / per_request).round();
        return Some(if every <= 1.0 {
            "for every request".to_string()
        } else {
            format!("for 1 in {every:.0} requests")
        });
    }
    Some(format!("{per_request:.2} per request"))
}

/// "7.9x [7.1-8.8]" and "+0.460 ms [0.410-0.520]".
fn ratio_with_ci(r: &ComparisonRow) -> String {
    match r.times_slower_ci {
        Some([lo, hi]) => format!("{:.2}x [{lo:.2}-{hi:.2}]", r.times_slower),
        None => format!("{:.2}x", r.times_slower),
    }
}

fn extra_with_ci(r: &ComparisonRow) -> String {
    let signed = |ms: f64| {
        if ms >= 0.0 {
            format!("+{}", fmt_ms(ms))
        } else {
            fmt_ms(ms)
        }
    };
    match r.extra_ms_per_request_ci {
        Some([lo, hi]) => format!(
            "{} ms per request [{}, {}]",
            signed(r.extra_ms_per_request),
            fmt_ms(lo),
            fmt_ms(hi)
        ),
        None => format!("{} ms per request", signed(r.extra_ms_per_request)),
    }
}

/// TLS early data: how many requests went in it, and what that saved (a fact of the
/// run, said whether or not the row differs from the best).
fn early_note(rs: &ScenarioReport, rtt: Option<f64>) -> Option<String> {
    let ed = rs.connections.early_data;
    if ed.attempted == 0 {
        return None;
    }
    let rejected = if ed.rejected > 0 {
        format!(
            " ({} more were rejected and sent again after the handshake)",
            ed.rejected
        )
    } else {
        String::new()
    };
    let effect = if rtt.is_some() {
        "each of those was on its way during the handshake, its response a round trip sooner; the others (full handshakes, or no ticket allowing it: tickets are used once) waited for the handshake"
    } else {
        "each of those was on its way during the handshake; the others (full handshakes, or no ticket allowing it: tickets are used once) waited for it"
    };
    Some(format!(
        " {} of {} requests went in TLS 1.3 early data (0-RTT){rejected}: {effect}.",
        ed.accepted, rs.requests.ok
    ))
}

/// One short sentence (two at most): what `r` pays per request that `best` does not,
/// in connections and handshakes (ms each; round trips only on a real link), what that
/// costs per request with its interval, and the extra CPU. A difference within the noise
/// is said to be none and not explained.
fn explain(
    r: &ComparisonRow,
    rs: &ScenarioReport,
    best: &ComparisonRow,
    bs: &ScenarioReport,
    rtt: Option<f64>,
    noise_threshold: f64,
) -> String {
    if r.times_slower_ci.is_none() {
        return format!(
            "{}: not enough rounds to judge against {} ({} of the {} a 95 % interval needs; {}).{}",
            r.name,
            best.name,
            r.rounds_ms.len(),
            crate::report::comparison::MIN_ROUNDS_FOR_INTERVAL,
            ratio_with_ci(r),
            early_note(rs, rtt).unwrap_or_default()
        );
    }
    if !r.significant {
        let [lo, hi] = r.times_slower_ci.unwrap_or([1.0, 1.0]);
        let why = match &r.repeat_of {
            Some(first) => {
                format!("an A/A run of {first}: the spread between the two is the machine's noise")
            }
            None if lo <= 1.0 && hi >= 1.0 => "the interval contains 1".to_string(),
            None if r
                .extra_ms_per_request_ci
                .is_some_and(|[lo, hi]| lo <= 0.0 && hi >= 0.0) =>
            {
                "the interval of the difference in ms contains 0".to_string()
            }
            None => format!("under the {:.0} % noise threshold", noise_threshold * 100.0),
        };
        return format!(
            "{}: no measurable difference from {} ({}; {why}).{}",
            r.name,
            best.name,
            ratio_with_ci(r),
            early_note(rs, rtt).unwrap_or_default()
        );
    }
    let per = |s: &ScenarioReport, n: u64| n as f64 / s.requests.ok.max(1) as f64;
    let d_tcp = per(rs, rs.connections.opened) - per(bs, bs.connections.opened);
    let d_full =
        per(rs, rs.connections.tls_handshakes.full) - per(bs, bs.connections.tls_handshakes.full);
    let d_res = per(rs, rs.connections.tls_handshakes.resumed)
        - per(bs, bs.connections.tls_handshakes.resumed);
    let new = &rs.phases_ms.new;
    let tls13 = rs.connections.tls_handshakes.tls13 > 0;
    let version = if tls13 { "TLS 1.3" } else { "TLS 1.2" };
    // A handshake's cost: its time, and on a real link the round trips it needs (TCP 1,
    // TLS 1.3 full or resumed 1, TLS 1.2 full 2, resumed 1) with the rest as CPU.
    let cost = |what: String, ms: f64, round_trips: f64| match rtt {
        Some(rtt) => {
            let rest = (ms - round_trips * rtt).max(0.0);
            format!(
                "{what} {} ms: {round_trips:.0} round trip{} + {} ms",
                fmt_ms(ms),
                if round_trips == 1.0 { "" } else { "s" },
                fmt_ms(rest)
            )
        }
        None => format!("{what} {} ms", fmt_ms(ms)),
    };
    let mut parts = Vec::new();
    let mut note = String::new();
    let mut often = None;
    // QUIC: transport and TLS 1.3 in one handshake of 1 round trip (with 0-RTT, the
    // request does not wait for it).
    let quic = rs.protocol == "h3";
    // Connections whose request went in 0-RTT: it did not wait for their handshake.
    let early = rs.connections.early_data.accepted;
    let in_0rtt = format!(
        "the request sent in 0-RTT without waiting for it on {early} of {} connections",
        rs.connections.opened
    );
    if let Some(o) = how_often(d_tcp) {
        if quic {
            let kind = if d_full >= d_res { "full" } else { "resumed" };
            if early > 0 {
                parts.push(format!(
                    "QUIC handshake with a {kind} TLS 1.3 inside, {in_0rtt}"
                ));
            } else {
                parts.push(cost(
                    format!("QUIC handshake with a {kind} TLS 1.3 inside"),
                    new.quic_handshake.mean,
                    1.0,
                ));
            }
        } else {
            parts.push(cost("TCP connect".into(), new.connect.mean, 1.0));
        }
        // The row's own rate, not its excess over the best's (close opens one for every
        // request even where keep-alive's 10 workers open one for every other).
        often = how_often(per(rs, rs.connections.opened)).or(Some(o));
    }
    let tls_rate = d_full.max(d_res);
    if quic {
        // Counted with the QUIC handshake above.
    } else if d_full >= 0.005 && d_full >= d_res {
        parts.push(cost(
            format!("full {version} handshake"),
            new.tls.mean,
            if tls13 { 1.0 } else { 2.0 },
        ));
    } else if d_res >= 0.005 && early > 0 {
        parts.push(format!("resumed {version} handshake, {in_0rtt}"));
    } else if d_res >= 0.005 {
        parts.push(cost(
            format!("resumed {version} handshake"),
            new.tls.mean,
            1.0,
        ));
        if rtt.is_some() {
            note = if tls13 {
                " A resumed TLS 1.3 handshake still takes its round trip: resumption saves CPU, not round trips (only 0-RTT does)."
            } else {
                " A resumed TLS 1.2 handshake takes 1 round trip where a full one takes 2."
            }
            .to_string();
        }
    }
    if let Some(early) = early_note(rs, rtt) {
        note = early;
    }
    if often.is_none() && how_often(tls_rate).is_some() {
        // Its connections cost more than the best's, not more of them.
        often = how_often(per(rs, rs.connections.opened));
    }
    let costs = format!(
        "{}, {} the time of {}",
        extra_with_ci(r),
        ratio_with_ci(r),
        best.name
    );
    let server = match (
        &r.server_cpu_us_per_request,
        &best.server_cpu_us_per_request,
    ) {
        (Some(a), Some(b)) if a.median - b.median >= 0.5 => {
            format!(" and the server {:.0} µs", a.median - b.median)
        }
        _ => String::new(),
    };
    let d_client = r.client_cpu_us_per_request.median - best.client_cpu_us_per_request.median;
    let cpu = if d_client >= 0.5 || !server.is_empty() {
        format!(
            " The client spends {:.0} µs{server} more CPU per request.",
            d_client.max(0.0)
        )
    } else {
        String::new()
    };
    match often {
        Some(often) => format!(
            "{} opens a new connection {often} ({}; {}): {costs}.{note}{cpu}",
            r.name,
            connection_counts(rs, best, bs),
            parts.join(", ")
        ),
        None => format!(
            "{} opens no more connections than {}: {costs}.{note}{cpu}",
            r.name, best.name
        ),
    }
}

/// "120 connections for 120 requests; keepalive 60, one per worker per round": the row's
/// own connections and the best's, both over all rounds, from which the sentence's rate
/// comes.
fn connection_counts(rs: &ScenarioReport, best: &ComparisonRow, bs: &ScenarioReport) -> String {
    let opened = bs.connections.opened;
    let per_round = bs.concurrency as u64 * best.rounds_ms.len().max(1) as u64;
    let per_worker = if opened == per_round && bs.concurrency > 1 {
        ", one per worker per round"
    } else {
        ""
    };
    let own = rs.connections.opened;
    format!(
        "{own} connection{} for {} requests; {} {opened}{per_worker}",
        if own == 1 { "" } else { "s" },
        rs.requests.ok,
        best.name
    )
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
    }

    #[test]
    fn how_often_reads_as_english() {
        assert_eq!(how_often(1.0).unwrap(), "for every request");
        assert_eq!(how_often(0.97).unwrap(), "for every request");
        assert_eq!(how_often(0.1).unwrap(), "for 1 in 10 requests");
        assert_eq!(how_often(2.0).unwrap(), "2 per request");
        assert_eq!(how_often(0.001), None);
    }
}
