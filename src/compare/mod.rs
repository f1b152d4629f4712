//! `handshake compare`: one workload under several connection strategies, run in
//! rounds, each in a new random order, so machine drift and position hit all alike;
//! figures are medians over the rounds with their spread; each strategy is set against
//! the best of its scheme by a paired estimate over the rounds with a 95 %
//! confidence interval, a difference within the noise is called none, and a real one is
//! explained in handshakes, milliseconds, CPU and (on a real link) round trips
//! ([`explain`]); [`offers`] chooses the strategies for a target.

mod explain;
mod feature;
pub(crate) mod knee;
pub(crate) mod offers;
pub(crate) mod plan;

use std::sync::Arc;
use std::time::Duration;

use crate::engine;
use crate::fmt::ms as fmt_ms;
use crate::metrics::run::Board;
use crate::plan::{Choice, Scenario};
use crate::procs::{ServerCpu, Shares};
use crate::progress::Steps;
use crate::record::Phase;
pub(crate) use crate::report::comparison::{
    Comparison, ComparisonRow, GroupRtt, RoundTrips, RttPoint, RttSweep, Spread,
};
use crate::report::finding::Cause;
use crate::report::ScenarioReport;
use crate::server::RunningServer;
use crate::stats::{paired, summary, Recorder};

/// Confidence of the intervals on "x slower" and "+ms per request".
pub(crate) const CONFIDENCE: f64 = 0.95;
/// A shortest TCP connect at least this long is a round trip worth counting; on loopback
/// a connect takes ~0.03-0.05 ms, all of it CPU and scheduling.
const MEANINGFUL_RTT_MS: f64 = 0.5;

/// One strategy against one URL (a row of the comparison).
pub(crate) struct Arm {
    pub name: String,
    /// Rows are compared within a group (the URL's scheme: http or https).
    pub group: String,
    /// The strategy, and the key exchange when chosen for this row.
    pub choice: Choice,
    pub scenario: Arc<Scenario>,
}

/// Figures of one run of one arm.
#[derive(Debug, Clone, Copy)]
struct RunFigures {
    time_per_request_ms: f64,
    wall_s: f64,
    requests_per_s: f64,
    mean_ms: f64,
    p50_ms: f64,
    p99_ms: f64,
    opened: f64,
    tls_full: f64,
    tls_resumed: f64,
    setup_ms: f64,
    client_cpu_us: f64,
    server_cpu_us: Option<f64>,
    server_accepted: Option<u64>,
    /// The client's CPU over the round's wall time (1.0: one core), and its threads.
    client_cores: f64,
    client_threads: usize,
    /// The server's and the machine's share over the round.
    shares: Shares,
    /// Answers that ended a request in the round (not `-L`'s redirects): without
    /// any, its figures mean nothing.
    ok: u64,
    /// `-L`: the round's responses that were redirects, followed.
    redirects: Option<u64>,
}

/// The server the rounds run against: the embedded one (its counts), and whose CPU time
/// is the server's.
pub(crate) struct ServerSide<'a> {
    pub embedded: Option<&'a RunningServer>,
    pub cpu: ServerCpu<'a>,
}

impl<'a> ServerSide<'a> {
    /// The embedded server when there is one, else the processes of `--server-pid`.
    pub(crate) fn new(embedded: Option<&'a RunningServer>, pids: &[u32]) -> ServerSide<'a> {
        let cpu = match embedded {
            Some(e) => ServerCpu::Embedded(&e.stats),
            None if !pids.is_empty() => ServerCpu::Pids(pids.to_vec()),
            None => ServerCpu::Unknown,
        };
        ServerSide { embedded, cpu }
    }
}

/// The result: one merged scenario report per arm, and the comparison.
pub(crate) struct CompareResult {
    pub scenarios: Vec<ScenarioReport>,
    pub comparison: Comparison,
}

fn figures(
    sc: &Scenario,
    rep: &ScenarioReport,
    shares: Shares,
    server_accepted: Option<u64>,
) -> RunFigures {
    let ok = rep.requests.answered.max(1) as f64;
    let new = &rep.phases_ms.new;
    let setup = new.setup_mean_ms();
    RunFigures {
        time_per_request_ms: rep.time_per_request_ms(),
        wall_s: rep.duration_s,
        requests_per_s: rep.throughput.requests_per_s,
        mean_ms: rep.latency_ms.mean,
        p50_ms: rep.latency_ms.p50,
        p99_ms: rep.latency_ms.p99,
        opened: rep.connections.opened as f64,
        redirects: rep.requests.redirects,
        tls_full: rep.connections.tls_handshakes.full as f64,
        tls_resumed: rep.connections.tls_handshakes.resumed as f64,
        setup_ms: setup,
        client_cpu_us: rep.cpu.client_us_per_request,
        server_cpu_us: shares.server_cpu_s.map(|cpu_s| cpu_s * 1e6 / ok),
        server_accepted,
        client_cores: if rep.duration_s > 0.0 {
            (rep.cpu.client_user_s + rep.cpu.client_sys_s) / rep.duration_s
        } else {
            0.0
        },
        client_threads: sc.threads,
        shares,
        ok: rep.requests.final_answers(),
    }
}

/// "at 20 ms RTT: " when the rounds run across an emulated link.
fn steps_label(rtt_set_ms: Option<f64>) -> String {
    rtt_set_ms
        .map(|r| format!("at {} ms RTT: ", crate::fmt::num(r)))
        .unwrap_or_default()
}

/// What the rounds left: per arm, each round's figures, its records laid end to end with
/// their wall and CPU time, and each round's shortest TCP connect.
struct Played {
    runs: Vec<Vec<RunFigures>>,
    merged: Vec<(Recorder, Duration, crate::cpu::CpuTime)>,
    /// The shortest TCP connect of each round: a round trip without queueing (under load
    /// the median connect also waits in the server's accept queue).
    connect_min: Vec<Vec<f64>>,
    /// The rounds that ran whole (fewer than asked when Ctrl-C cut one short: that one is
    /// left out, so every arm has the same rounds to pair).
    rounds: usize,
}

/// Run every arm `rounds` times, in turn, in a new random order every round; each round
/// said on stderr (`steps`) with an estimate of the time to go.
pub(crate) fn run(arms: &[Arm], how: &Rounds) -> anyhow::Result<CompareResult> {
    let played = play(arms, how)?;
    if played.rounds == 0 {
        anyhow::bail!(
            "interrupted before the first round ended: no strategy ran a whole round, so nothing can be compared"
        );
    }
    let scenarios = summaries(arms, &played);
    let judge = Judge {
        arms,
        scenarios: &scenarios,
        connect_min: &played.connect_min,
        rounds: played.rounds,
        rtt_set_ms: how.rtt_set_ms,
        noise_threshold: how.noise_threshold,
    };
    let comparison = judge.comparison(&played.runs);
    Ok(CompareResult {
        scenarios,
        comparison,
    })
}

/// Each arm's rounds merged into one scenario report.
fn summaries(arms: &[Arm], played: &Played) -> Vec<ScenarioReport> {
    arms.iter()
        .zip(&played.merged)
        .map(|(arm, (rec, wall, cpu))| {
            summary::summarize_with_raw(&arm.scenario.shape(), rec, *wall, *cpu)
        })
        .collect()
}

impl Judge<'_> {
    /// The comparison of the judge's arms from their rounds (`runs`, one per arm).
    fn comparison(&self, runs: &[Vec<RunFigures>]) -> Comparison {
        let arms = self.arms;
        let mut rows: Vec<ComparisonRow> =
            (0..arms.len()).map(|i| row(arms, i, &runs[i])).collect();
        let mut groups: Vec<&str> = Vec::new();
        for a in arms {
            if !groups.contains(&a.group.as_str()) {
                groups.push(&a.group);
            }
        }
        let mut said = Said::default();
        let rtts = groups
            .iter()
            .filter_map(|g| self.group(g, &mut rows, &mut said))
            .collect();
        let first = &arms[0].scenario;
        Comparison {
            rounds: self.rounds,
            method: "rounds in a new random order each; per row against the group's best (lowest median time per request): Hodges-Lehmann estimate of the paired per-round ratio and difference, 95 % interval from the Wilcoxon signed-rank test",
            confidence: CONFIDENCE,
            noise_threshold: self.noise_threshold,
            requests_per_round: first.stop.requests,
            concurrency: first.concurrency,
            rtt_ms: rtts,
            rows,
            headline: said.headline,
            explanations: said.explanations,
            left_out: Vec::new(),
        }
    }
}

/// How the rounds run and are judged, whatever the arms.
pub(crate) struct Rounds<'a> {
    pub rounds: usize,
    pub server: ServerSide<'a>,
    pub noise_threshold: f64,
    /// Across the lab's link: the round trip set.
    pub rtt_set_ms: Option<f64>,
    /// Where each round is said (stderr), with the time to go.
    pub steps: &'a Steps,
    /// `--metrics`, `--remote-write`: where each round's counts go, live and kept.
    pub board: Option<Arc<Board>>,
}

/// The rounds themselves: every arm once a round, in a new random order each.
fn play(arms: &[Arm], how: &Rounds) -> anyhow::Result<Played> {
    let (rounds, server, rtt_set_ms, steps) = (how.rounds, &how.server, how.rtt_set_ms, how.steps);
    let began = std::time::Instant::now();
    let mut played = Played {
        runs: vec![Vec::new(); arms.len()],
        merged: arms
            .iter()
            .map(|_| {
                (
                    Recorder::new(),
                    Duration::ZERO,
                    crate::cpu::CpuTime::default(),
                )
            })
            .collect(),
        connect_min: vec![Vec::new(); arms.len()],
        rounds: 0,
    };
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
        let mut pieces = Vec::with_capacity(order.len());
        for &i in &order {
            if crate::interrupt::requested() {
                break;
            }
            steps.show(&format!(
                "{}round {} of {rounds}: {}",
                steps_label(rtt_set_ms),
                round + 1,
                arms[i].name
            ));
            pieces.push((i, play_one(&arms[i], server, how.board.as_ref())?));
            steps.advance();
        }
        // Ctrl-C: a round cut short is left out (its arms would pair with nothing).
        if crate::interrupt::requested() {
            if let Some(b) = &how.board {
                for (i, _) in &pieces {
                    b.discard(&arms[*i].scenario);
                }
            }
            break;
        }
        for (i, piece) in pieces {
            if let Some(b) = &how.board {
                b.keep(&arms[i].scenario, &piece.result.recorder);
            }
            piece.keep(i, &mut played);
        }
        played.rounds += 1;
    }
    Ok(played)
}

/// One run of one arm: its figures, its records, and its shortest connect.
struct Piece {
    figures: RunFigures,
    result: engine::RunResult,
    connect_min: Option<f64>,
}

impl Piece {
    /// Keep it as arm `i`'s next round: its records merged into the arm's.
    fn keep(self, i: usize, played: &mut Played) {
        if let Some(c) = self.connect_min {
            played.connect_min[i].push(c);
        }
        played.runs[i].push(self.figures);
        let m = &mut played.merged[i];
        // The strategy's rounds laid end to end on its timeline.
        m.0.add_after(&self.result.recorder, m.1);
        m.1 += self.result.wall;
        m.2 = m.2 + self.result.cpu;
    }
}

/// One run of one arm.
fn play_one(arm: &Arm, server: &ServerSide, board: Option<&Arc<Board>>) -> anyhow::Result<Piece> {
    let accepted = || server.embedded.map(|s| s.snapshot().connections_accepted);
    let (before, accepted_before) = (server.cpu.sample(), accepted());
    let live = board.map(|b| b.live(&arm.scenario));
    let result = engine::run_live(arm.scenario.clone(), false, live)?;
    let (shares, accepted_after) = (before.shares(&server.cpu.sample(), result.wall), accepted());
    let accepted = accepted_before.zip(accepted_after).map(|(a, b)| b - a);
    let rep = summary::summarize(
        &arm.scenario.shape(),
        &result.recorder,
        result.wall,
        result.cpu,
    );
    Ok(Piece {
        figures: figures(&arm.scenario, &rep, shares, accepted),
        connect_min: (rep.phases_ms.new[Phase::Connect].count > 0)
            .then_some(rep.phases_ms.new[Phase::Connect].min),
        result,
    })
}

/// Arm `i`'s row: the medians and spreads of its rounds, not yet set against its best.
fn row(arms: &[Arm], i: usize, runs: &[RunFigures]) -> ComparisonRow {
    let arm = &arms[i];
    let col = |f: fn(&RunFigures) -> f64| Spread::of(&runs.iter().map(f).collect::<Vec<_>>());
    ComparisonRow {
        name: arm.name.clone(),
        group: arm.group.clone(),
        strategy: arm.scenario.strategy.name().to_string(),
        url: arm
            .scenario
            .targets
            .first()
            .map(|t| t.url.clone())
            .unwrap_or_default(),
        time_per_request_ms: col(|r| r.time_per_request_ms),
        wall_s: col(|r| r.wall_s),
        requests_per_s: col(|r| r.requests_per_s),
        latency_mean_ms: col(|r| r.mean_ms),
        latency_p99_ms: col(|r| r.p99_ms),
        connections_opened: col(|r| r.opened),
        redirects: arm.scenario.redirects.as_ref().map(|_| {
            Spread::of(
                &runs
                    .iter()
                    .map(|r| r.redirects.unwrap_or(0) as f64)
                    .collect::<Vec<_>>(),
            )
        }),
        tls_full: col(|r| r.tls_full),
        tls_resumed: col(|r| r.tls_resumed),
        setup_ms_per_new_connection: col(|r| r.setup_ms),
        client_cpu_us_per_request: col(|r| r.client_cpu_us),
        server_cpu_us_per_request: runs
            .iter()
            .map(|r| r.server_cpu_us)
            .collect::<Option<Vec<f64>>>()
            .map(|v| Spread::of(&v)),
        server_connections_accepted: runs.iter().map(|r| r.server_accepted).sum(),
        tls_groups: arm.choice.groups.as_ref().map(|(_, groups)| {
            groups
                .iter()
                .map(|g| crate::record::kx_group_name(u16::from(g.name())))
                .collect()
        }),
        rounds_ms: runs.iter().map(|r| r.time_per_request_ms).collect(),
        rounds_client_cpu_us: runs.iter().map(|r| r.client_cpu_us).collect(),
        failed_rounds: runs.iter().filter(|r| r.ok == 0).count(),
        no_success: false,
        feature_missing: None,
        times_slower: 1.0,
        times_slower_ci: None,
        extra_ms_per_request: 0.0,
        extra_ms_per_request_ci: None,
        significant: false,
        best: false,
        repeat_of: arms[..i]
            .iter()
            .find(|a| {
                // A direct row beside proxied ones is not a repeat (the path differs).
                let proxied = |a: &Arm| a.scenario.origins.iter().any(|o| o.proxy.is_some());
                a.group == arm.group && a.choice.same(&arm.choice) && proxied(a) == proxied(arm)
            })
            .map(|a| a.name.clone()),
        round_trips: None,
    }
}

/// What a comparison says: its headline and its explanations, group by group.
#[derive(Default)]
struct Said {
    headline: Vec<crate::report::finding::Finding>,
    explanations: Vec<crate::report::finding::Finding>,
}

/// What setting each group's rows against its best needs.
struct Judge<'a> {
    arms: &'a [Arm],
    scenarios: &'a [ScenarioReport],
    connect_min: &'a [Vec<f64>],
    rounds: usize,
    rtt_set_ms: Option<f64>,
    noise_threshold: f64,
}

impl Judge<'_> {
    /// Whether scenario `i` had responses and none was a success (2xx, 3xx or
    /// `--ok-status`; with `-L`, the redirects followed left out, as hops on the way):
    /// its time per request is that of error answers, not of the requests meant, so it
    /// is not ranked.
    fn no_success(&self, i: usize) -> bool {
        let r = &self.scenarios[i].requests;
        r.final_answers() > 0 && r.final_ok() == 0
    }

    /// Set group `g`'s rows against its best (the lowest median time per request among
    /// the rows that succeeded in every round), count their round trips on a real link,
    /// and explain each; the group's round trip. `None` when no row can be ranked.
    fn group(&self, g: &str, rows: &mut [ComparisonRow], said: &mut Said) -> Option<GroupRtt> {
        let idx: Vec<usize> = (0..rows.len()).filter(|i| rows[*i].group == g).collect();
        // A row with a round in which no request succeeded is not ranked: its time per
        // request is undefined there.
        for &i in idx.iter().filter(|i| rows[**i].failed_rounds > 0) {
            said.explanations.push(explain::failed_explanation(
                &rows[i],
                &self.scenarios[i],
                self.rounds,
            ));
        }
        // Nor is a row whose every response was an error: said instead, in its own
        // headline's words (what the server said).
        for &i in idx.iter().filter(|i| self.no_success(**i)) {
            rows[i].no_success = true;
            let s = &self.scenarios[i];
            if let Some(h) = &s.headline {
                let mut h = h.clone();
                h.text = format!("{}: {}", rows[i].name, h.text);
                said.headline.push(h);
            }
        }
        // A row whose figures are not those of what it set out to measure (most
        // responses redirects or errors; its strategy's defining feature never
        // happened: no connection reused, no session resumed, no 0-RTT accepted) is
        // ranked, but said first, in the words of its own run's explaining finding.
        // Such a row is marked, and not ranked: its figures are not what it is named for.
        for &i in idx.iter().filter(|i| !self.no_success(**i)) {
            let s = &self.scenarios[i];
            rows[i].feature_missing = feature::missing(s);
            let explains = s.diagnosis.iter().find(|f| {
                f.explains_run && matches!(f.cause, Cause::Status | Cause::Protocol | Cause::Reuse)
            });
            if let Some(f) = explains {
                let mut f = f.clone();
                f.text = format!("{}: {}", rows[i].name, f.text);
                said.headline.push(f);
            } else if let Some(what) = rows[i].feature_missing {
                said.headline.push(feature::said(&rows[i].name, what, s));
            }
        }
        let ranked: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|i| {
                rows[*i].failed_rounds == 0
                    && !self.no_success(*i)
                    && rows[*i].feature_missing.is_none()
            })
            .collect();
        let best = ranked.iter().copied().min_by(|a, b| {
            rows[*a]
                .time_per_request_ms
                .median
                .total_cmp(&rows[*b].time_per_request_ms.median)
        })?;
        for &i in &ranked {
            versus_best(rows, i, best, self.noise_threshold);
        }
        let (group_rtt, counted) = self.rtt(g, &idx);
        if let Some(rtt) = counted {
            for &i in &idx {
                rows[i].round_trips = counted_round_trips(&self.scenarios[i]).map(|c| RoundTrips {
                    counted: c,
                    measured: rows[i].time_per_request_ms.median / rtt,
                });
            }
            said.explanations
                .extend(explain::round_trips_line(g, rows, &idx, rtt));
        }
        said.headline.extend(explain::headline(
            rows,
            self.scenarios,
            &ranked,
            best,
            counted,
        ));
        for &i in ranked.iter().filter(|i| **i != best) {
            said.explanations.push(explain::explain(
                &rows[i],
                &self.scenarios[i],
                &rows[best],
                &self.scenarios[best],
                counted,
                self.noise_threshold,
            ));
        }
        self.key_exchanges(rows, &ranked, said);
        Some(group_rtt)
    }

    /// A sentence for each row of a strategy already in the group with another key
    /// exchange (`close@x25519mlkem768` after `close@x25519`), or without the client
    /// certificate (`close@no-cert` and `close`), set against that row.
    fn key_exchanges(&self, rows: &[ComparisonRow], ranked: &[usize], said: &mut Said) {
        for (k, &i) in ranked.iter().enumerate() {
            let arm = &self.arms[i];
            let other = ranked[..k].iter().copied().find(|&j| {
                let o = &self.arms[j].choice;
                o.strategy == arm.choice.strategy && !o.same(&arm.choice)
            });
            if let Some(j) = other {
                said.explanations.push(explain::against_its_strategy(
                    (&self.arms[i].choice, &rows[i], &self.scenarios[i]),
                    (&self.arms[j].choice, &rows[j], &self.scenarios[j]),
                    self.noise_threshold,
                ));
            }
        }
    }

    /// The group's round trip (the median of its rounds' shortest connects), and the
    /// one to count round trips with when it is real (across the lab's link, the one set).
    fn rtt(&self, g: &str, idx: &[usize]) -> (GroupRtt, Option<f64>) {
        let all_connects: Vec<f64> = idx
            .iter()
            .flat_map(|i| self.connect_min[*i].iter().copied())
            .collect();
        // Over a Unix socket there is no round trip to tell, only a connect.
        let unix = idx.iter().all(|i| {
            self.arms[*i]
                .scenario
                .origins
                .iter()
                .all(|o| o.unix.is_some())
        });
        let rtt = (!unix && !all_connects.is_empty()).then(|| Spread::of(&all_connects).median);
        // A loopback target has no network round trip: its connects are CPU and, under
        // load, accept-queue waiting.
        let loopback = idx.iter().all(|i| {
            self.arms[*i].scenario.origins.iter().all(|o| {
                o.dial_host == "localhost"
                    || o.fixed_addrs
                        .as_ref()
                        .is_some_and(|a| a.iter().all(|x| x.ip().is_loopback()))
            })
        });
        // Across the lab's link the round trip is the one set: exact, not estimated.
        let (round_trips, counted) = match self.rtt_set_ms {
            Some(set) => (set >= MEANINGFUL_RTT_MS, Some(set)),
            None => (
                !loopback && rtt.is_some_and(|r| r >= MEANINGFUL_RTT_MS),
                rtt,
            ),
        };
        let group = GroupRtt {
            group: g.to_string(),
            rtt_set_ms: self.rtt_set_ms,
            rtt_ms: rtt,
            round_trips,
        };
        (group, counted.filter(|_| round_trips))
    }
}

/// Round trips per request, counted from what the run did (see [`RoundTrips`]).
fn counted_round_trips(s: &ScenarioReport) -> Option<f64> {
    let ok = s.requests.answered;
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
    // A HelloRetryRequest costs its handshake one more, and so does a server's first
    // flight that waited (above TCP's initial window, or QUIC's anti-amplification
    // limit).
    let waited = c
        .quic
        .as_ref()
        .map_or(hs.first_flight_extra_round_trips, |q| {
            q.handshake_extra_round_trips
        });
    let tls = tls + hs.hello_retry_requests + waited;
    let before = (c.opened + tls).saturating_sub(c.early_data.accepted);
    Some(1.0 + before as f64 / ok as f64)
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
