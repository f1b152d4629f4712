//! `compare -c 1,10,50,200`: every strategy at every concurrency in the same rounds (a
//! new random order each, so drift hits every step alike), each step judged as a
//! comparison of its own, and per strategy the knee: the step after which requests/s
//! stops growing by more than the noise (a paired estimate over the rounds with its
//! 95 % interval), and who is at its limit there, from the CPU each side used.

use super::{paired, play, summaries, Arm, Judge, Rounds, RunFigures, Spread, CONFIDENCE};
use crate::procs::ServerCpu;
use crate::report::finding::{Cause, Evidence, Finding};
use crate::report::knee::{ConcurrencyStep, ConcurrencySweep, Growth, KneePoint, KneeSeries};
use crate::report::ScenarioReport;

/// A side at this share of what it can use (its working threads' cores) is saturated.
const SATURATED: f64 = 0.9;
/// The machine at this share of all its cores is full: with client and server waiting on
/// each other over loopback, some of every core's time goes idle in the hand-offs.
const MACHINE_FULL: f64 = 0.85;
/// Where the server's working threads and the client want more cores than the machine
/// has, it is shared from this share on: more of the cores' time goes to the hand-offs.
const MACHINE_SHARED: f64 = 0.75;

/// The sweep's arms: `arms[i]` runs at concurrency `at[i]`, each step's arms side by side
/// and named "c=<n> " + the series' name.
pub(crate) struct SweepArms<'a> {
    pub arms: &'a [Arm],
    pub at: &'a [usize],
}

/// Play every arm `rounds` times and judge each step and each series.
pub(crate) fn sweep(
    s: SweepArms,
    how: &Rounds,
) -> anyhow::Result<(Vec<ScenarioReport>, ConcurrencySweep)> {
    let (rounds, noise_threshold, rtt_set_ms) = (how.rounds, how.noise_threshold, how.rtt_set_ms);
    let played = play(s.arms, how)?;
    let scenarios = summaries(s.arms, &played);
    let mut concurrencies: Vec<usize> = s.at.to_vec();
    concurrencies.dedup();
    let range = |c: usize| {
        let lo = s.at.iter().position(|x| *x == c).unwrap_or(0);
        lo..lo + s.at.iter().filter(|x| **x == c).count()
    };
    let steps = concurrencies
        .iter()
        .map(|&c| {
            let r = range(c);
            let judge = Judge {
                arms: &s.arms[r.clone()],
                scenarios: &scenarios[r.clone()],
                connect_min: &played.connect_min[r.clone()],
                rounds,
                rtt_set_ms,
                noise_threshold,
            };
            ConcurrencyStep {
                concurrency: c,
                comparison: judge.comparison(&played.runs[r]),
            }
        })
        .collect();
    let machine_cores = crate::procs::cores();
    let first = range(concurrencies[0]);
    let series = s.arms[first]
        .iter()
        .map(|arm| {
            let name = series_name(&arm.name);
            // This series' arm at each step, in the steps' order.
            let runs: Vec<&[RunFigures]> = concurrencies
                .iter()
                .filter_map(|&c| {
                    range(c)
                        .find(|&i| series_name(&s.arms[i].name) == name)
                        .map(|i| played.runs[i].as_slice())
                })
                .collect();
            series(
                Named {
                    name,
                    group: &arm.group,
                    strategy: arm.scenario.strategy.name(),
                },
                &concurrencies,
                &runs,
                noise_threshold,
                machine_cores,
            )
        })
        .collect();
    let server_cpu_from = match how.server.cpu {
        ServerCpu::Unknown => None,
        ServerCpu::Embedded(_) => Some("embedded".to_string()),
        ServerCpu::Pids(_) => Some("pids".to_string()),
    };
    Ok((
        scenarios,
        ConcurrencySweep {
            machine_cores,
            server_cpu_from,
            steps,
            series,
        },
    ))
}

/// "c=10 http keepalive" without its step.
fn series_name(row: &str) -> &str {
    match row.split_once(' ') {
        Some((c, rest)) if c.starts_with("c=") => rest,
        _ => row,
    }
}

struct Named<'a> {
    name: &'a str,
    group: &'a str,
    strategy: &'a str,
}

/// One series: its figures at each step, the growth from each step to the next, the knee
/// and the verdict.
fn series(
    n: Named,
    concurrencies: &[usize],
    runs: &[&[RunFigures]],
    noise_threshold: f64,
    machine_cores: usize,
) -> KneeSeries {
    let points: Vec<KneePoint> = runs
        .iter()
        .enumerate()
        .map(|(k, r)| {
            point(
                concurrencies[k],
                r,
                k.checked_sub(1).map(|p| runs[p]),
                noise_threshold,
            )
        })
        .collect();
    // The knee: the step after which requests/s grows beyond the noise no more (a
    // plateau that a later step climbs out of is not one).
    let grew = |k: usize| points[k].growth.as_ref().is_some_and(|g| g.grew);
    let knee = (0..points.len() - 1).find(|&k| !(k + 1..points.len()).any(grew));
    // Who is at its limit is read past the knee, where requests/s is as high and the
    // load higher (at the knee itself the limit may be a few % short of full), or at the
    // last step when there is no knee.
    let at = knee.map_or(points.len() - 1, |k| k + 1);
    let (limit, why) = limit(&points[at], machine_cores);
    let growth = growth_sentence(n.name, &points, knee, noise_threshold);
    let verdict = Finding::new(
        if knee.is_some() { "knee" } else { "no_knee" },
        Cause::Measured,
        format!("{growth}; at c={}, {why}.", points[at].concurrency),
    )
    .with_all(evidence(&points, knee, at));
    KneeSeries {
        name: n.name.to_string(),
        group: n.group.to_string(),
        strategy: n.strategy.to_string(),
        knee: knee.map(|k| points[k].concurrency),
        limit: limit.to_string(),
        verdict,
        points,
    }
}

/// The figures a knee's verdict stands on: requests/s at the knee, the growth of the
/// step after it (with its interval's ends), and at the step where the limit is read,
/// the client's, the server's and the machine's shares (`points[c=N]`: the series'
/// point at that concurrency; medians over the rounds).
fn evidence(points: &[KneePoint], knee: Option<usize>, at: usize) -> Vec<Evidence> {
    let rounds = "rounds (median)";
    let fig = |p: &KneePoint, field: &str, v: f64| {
        Evidence::figure(
            &format!("points[c={}].{field}", p.concurrency),
            v,
            None,
            rounds,
        )
    };
    let mut out = Vec::new();
    if let Some(k) = knee {
        out.push(fig(
            &points[k],
            "requests_per_s.median",
            points[k].requests_per_s.median,
        ));
    }
    let p = &points[at];
    if let Some(g) = &p.growth {
        out.push(fig(p, "growth.ratio", g.ratio));
        if let Some([lo, hi]) = g.ratio_ci {
            out.push(fig(p, "growth.ratio_ci[0]", lo));
            out.push(fig(p, "growth.ratio_ci[1]", hi));
        }
    }
    out.push(fig(p, "client_cores.median", p.client_cores.median));
    if let Some(s) = &p.server_cores {
        out.push(fig(p, "server_cores.median", s.median));
    }
    if let Some(m) = &p.machine_busy {
        out.push(fig(p, "machine_busy.median", m.median));
    }
    out
}

fn point(
    concurrency: usize,
    runs: &[RunFigures],
    before: Option<&[RunFigures]>,
    noise_threshold: f64,
) -> KneePoint {
    let col = |f: fn(&RunFigures) -> f64| Spread::of(&runs.iter().map(f).collect::<Vec<_>>());
    let opt = |f: fn(&RunFigures) -> Option<f64>| {
        runs.iter()
            .map(f)
            .collect::<Option<Vec<f64>>>()
            .map(|v| Spread::of(&v))
    };
    KneePoint {
        concurrency,
        requests_per_s: col(|r| r.requests_per_s),
        latency_p50_ms: col(|r| r.p50_ms),
        latency_p99_ms: col(|r| r.p99_ms),
        client_cores: col(|r| r.client_cores),
        client_threads: runs.first().map_or(1, |r| r.client_threads),
        server_cores: opt(|r| r.shares.server_cores),
        server_cpu_s: runs
            .iter()
            .map(|r| r.shares.server_cpu_s)
            .sum::<Option<f64>>(),
        server_threads: opt(|r| r.shares.server_threads.map(|t| t as f64))
            .map(|s| s.median.round() as usize),
        machine_busy: opt(|r| r.shares.machine_busy),
        growth: before.map(|b| growth(b, runs, noise_threshold)),
    }
}

/// Requests/s of `after` against `before`, paired by round (they ran in the same rounds).
fn growth(before: &[RunFigures], after: &[RunFigures], noise_threshold: f64) -> Growth {
    let logs: Vec<f64> = before
        .iter()
        .zip(after)
        .filter(|(b, a)| b.requests_per_s > 0.0 && a.requests_per_s > 0.0)
        .map(|(b, a)| (a.requests_per_s / b.requests_per_s).ln())
        .collect();
    let e = paired::hodges_lehmann(&logs, CONFIDENCE);
    let ratio = e.as_ref().map_or(1.0, |e| e.center.exp());
    let ratio_ci = e
        .as_ref()
        .and_then(|e| e.interval)
        .map(|(lo, hi)| [lo.exp(), hi.exp()]);
    let up = 1.0 + noise_threshold;
    // Without an interval (too few rounds) the estimate itself must clear the noise.
    let [lo, hi] = ratio_ci.unwrap_or([ratio, ratio]);
    Growth {
        ratio,
        ratio_ci,
        grew: lo > up,
        fell: hi < 1.0 / up,
    }
}

/// "requests/s stops growing after c=10 (31,200/s; c=50 gives 1.01x [0.99, 1.03], within
/// the 5 % noise)", or "still grows at the last step".
fn growth_sentence(
    name: &str,
    points: &[KneePoint],
    knee: Option<usize>,
    noise_threshold: f64,
) -> String {
    let ratio = |g: &Growth| match g.ratio_ci {
        Some([lo, hi]) => format!("{:.2}x [{lo:.2}, {hi:.2}]", g.ratio),
        None => format!("{:.2}x (too few rounds for an interval)", g.ratio),
    };
    let noise = crate::fmt::num(noise_threshold * 100.0);
    if points.len() < 2 {
        return format!("{name}: one step, no knee to find");
    }
    match knee {
        Some(k) => {
            let next = &points[k + 1];
            let g = next.growth.as_ref().expect("a later step has a growth");
            let fell = points[k + 1..]
                .iter()
                .find(|p| p.growth.as_ref().is_some_and(|g| g.fell))
                .map(|p| format!(", and falls by c={}", p.concurrency))
                .unwrap_or_default();
            format!(
                "{name}: requests/s stops growing after c={} ({:.0}/s; c={} gives {}, {}){fell}",
                points[k].concurrency,
                points[k].requests_per_s.median,
                next.concurrency,
                ratio(g),
                if g.fell {
                    "fewer".to_string()
                } else {
                    format!("within the {noise} % noise")
                }
            )
        }
        None => {
            let last = points.last().expect("two steps");
            let g = last.growth.as_ref().expect("a later step has a growth");
            format!(
                "{name}: requests/s still grows at the last step (c={}: {} over c={}): the knee is beyond it, raise -c",
                last.concurrency,
                ratio(g),
                points[points.len() - 2].concurrency
            )
        }
    }
}

/// "one core", "2 cores".
fn cores(n: usize) -> String {
    if n == 1 {
        "its one core".to_string()
    } else {
        format!("its {n} cores")
    }
}

fn pct(share: f64) -> String {
    format!("{:.0} %", share * 100.0)
}

/// Who is at its limit at point `p`, and the sentence that says it.
fn limit(p: &KneePoint, machine_cores: usize) -> (&'static str, String) {
    let client = p.client_cores.median;
    let client_can = p.client_threads.clamp(1, machine_cores);
    let server = p.server_cores.as_ref().map(|s| s.median);
    let server_can = p.server_threads.unwrap_or(1).clamp(1, machine_cores);
    let machine = p.machine_busy.as_ref().map(|s| s.median);
    let of_a_core = |x: f64| format!("{} of a core", pct(x));
    // The server's working threads and the client together want more cores than the
    // machine has: neither can have all it would use.
    let contended = server.is_some() && server_can as f64 + client > machine_cores as f64;
    if let Some(m) = machine.filter(|m| contended && *m >= MACHINE_SHARED) {
        return ("machine", shared(m, machine_cores, client, server));
    }
    if let Some(s) = server.filter(|s| *s >= SATURATED * server_can as f64) {
        return (
            "server",
            format!(
                "the server is at {} of {}: this is its capacity (the client at {})",
                pct(s / server_can as f64),
                cores(server_can),
                of_a_core(client)
            ),
        );
    }
    if client >= SATURATED * client_can as f64 {
        return (
            "client",
            format!(
                "the client is at {} of {} (-t {}): this is the client's limit, not the server's: give it more threads (-t) or another machine",
                pct(client / client_can as f64),
                cores(client_can),
                p.client_threads
            ),
        );
    }
    if let Some(m) = machine.filter(|m| *m >= MACHINE_FULL) {
        return ("machine", shared(m, machine_cores, client, server));
    }
    let machine = machine.map_or(String::new(), |m| format!(", the machine {} busy", pct(m)));
    match server {
        Some(s) => (
            "elsewhere",
            format!(
                "neither side is saturated (the client at {}, the server at {}{machine}): the limit is elsewhere: the server's workers or pool, a lock, the network",
                of_a_core(client),
                of_a_core(s)
            ),
        ),
        None => (
            "unknown",
            format!(
                "the client is not saturated ({}{machine}); --server-pid tells whether the server is",
                of_a_core(client)
            ),
        ),
    }
}

/// "client and server share the machine: its 2 cores are 97 % busy (...)".
fn shared(m: f64, machine_cores: usize, client: f64, server: Option<f64>) -> String {
    let of_a_core = |x: f64| format!("{} of a core", pct(x));
    // Loopback's packets are handled in the kernel's softirq time, on no one's thread.
    let rest = m * machine_cores as f64 - client - server.unwrap_or(0.0);
    let server = match server {
        Some(s) if rest >= 0.2 => format!(
            "the server at {}, the rest the kernel's networking and other processes",
            of_a_core(s)
        ),
        Some(s) => format!("the server at {}", of_a_core(s)),
        None => "--server-pid gives the server's share".to_string(),
    };
    format!(
        "client and server share the machine: its {machine_cores} cores are {} busy (the client at {}, {server}); the limit is this machine, not the server alone: load it from another machine to see the server's own",
        pct(m),
        of_a_core(client)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procs::Shares;

    fn run(rps: f64, client: f64, server: f64, machine: f64) -> RunFigures {
        RunFigures {
            time_per_request_ms: 1.0,
            wall_s: 1.0,
            requests_per_s: rps,
            mean_ms: 1.0,
            p50_ms: 1.0,
            p99_ms: 2.0,
            opened: 1.0,
            redirects: None,
            tls_full: 0.0,
            tls_resumed: 0.0,
            setup_ms: 0.0,
            client_cpu_us: 10.0,
            server_cpu_us: Some(10.0),
            server_accepted: None,
            client_cores: client,
            client_threads: 2,
            shares: Shares {
                server_cpu_s: Some(server),
                server_cores: Some(server),
                server_threads: Some(1),
                machine_busy: Some(machine),
            },
            ok: 1000,
        }
    }

    /// Ten rounds of each step, with a little noise.
    fn rounds(rps: f64, client: f64, server: f64, machine: f64) -> Vec<RunFigures> {
        (0..10)
            .map(|i| run(rps * (1.0 + 0.01 * (i % 3) as f64), client, server, machine))
            .collect()
    }

    fn named() -> Named<'static> {
        Named {
            name: "http keepalive",
            group: "http",
            strategy: "keepalive",
        }
    }

    #[test]
    fn the_knee_is_the_step_after_which_requests_stop_growing() {
        let steps = [
            rounds(10_000.0, 0.3, 0.4, 0.4),
            rounds(30_000.0, 0.7, 0.97, 0.85),
            rounds(30_300.0, 0.7, 0.99, 0.86),
        ];
        let runs: Vec<&[RunFigures]> = steps.iter().map(Vec::as_slice).collect();
        let s = series(named(), &[1, 10, 50], &runs, 0.05, 2);
        assert_eq!(s.knee, Some(10), "{s:?}");
        let v = &s.verdict.text;
        assert_eq!(s.limit, "server", "{v}");
        assert!(v.contains("stops growing after c=10"), "{v}");
        assert!(v.contains("this is its capacity"), "{v}");
        assert_eq!(s.verdict.code, "knee");
    }

    #[test]
    fn a_series_that_grows_to_the_end_has_no_knee_and_a_busy_machine_is_shared() {
        let steps = [
            rounds(10_000.0, 0.5, 0.5, 0.5),
            rounds(20_000.0, 0.9, 1.0, 0.95),
        ];
        let mut last = steps[1].clone();
        for r in &mut last {
            r.shares.server_threads = Some(2);
        }
        let runs: Vec<&[RunFigures]> = vec![&steps[0], &last];
        let s = series(named(), &[1, 10], &runs, 0.05, 2);
        assert_eq!(s.knee, None);
        let v = &s.verdict.text;
        assert_eq!(s.limit, "machine", "{v}");
        assert!(v.contains("still grows"), "{v}");
        assert!(v.contains("share the machine"), "{v}");
        assert_eq!(s.verdict.code, "no_knee");
    }
}
