//! `handshake compare`: one workload under several connection strategies, side by side
//! (the rounds, the statistics and the sentences are in [`crate::compare`]).

use super::{embedded_path, emit_checked};
use crate::cli::CompareArgs;
use crate::compare;
use crate::config::{self, parse_percent, UsageError};
use crate::embedded::{on_client, Embedded};
use crate::lab::LinkSpec;
use crate::plan::{Choice, Strategy};
use crate::report::link::LinkReport;
use crate::report::server::StatsSnapshot;
use crate::report::{thresholds, Report};

pub fn run(a: CompareArgs) -> anyhow::Result<i32> {
    let started_at = crate::host::now_rfc3339();
    crate::interrupt::install();
    // Across a link every round costs round trips; 6 is the fewest that give an interval.
    let rounds = a.rounds.unwrap_or(if a.link.any() { 6 } else { 10 });
    if rounds == 0 || rounds > 1000 {
        return Err(UsageError("--rounds must be between 1 and 1000".into()).into());
    }
    let sweep = config::concurrency_steps(&a.load)?;
    let mut chosen = config::parse_strategies("--strategies", a.strategies.as_deref())?;
    if sweep.is_some() && chosen.is_none() {
        // Report 004's table: keep-alive and a new connection per request, side by side.
        chosen = config::parse_strategies(
            "--strategies",
            Some(&["keepalive".to_string(), "close".to_string()]),
        )?;
    }
    let noise_threshold = parse_percent("--noise-threshold", &a.noise_threshold)?;
    let thresholds = thresholds::parse_all(&a.output.fail_if, thresholds::Subject::Compare)?;
    let accepted = super::ok_statuses(&a.output)?;
    super::proxy_env_note();
    let path = embedded_path(
        a.url.as_deref(),
        &a.link,
        a.request.urls_from_file.is_some(),
    )?;
    let specs: Vec<Option<LinkSpec>> = if a.link.any() {
        crate::config::parse_link(&a.link, true)?
            .into_iter()
            .map(Some)
            .collect()
    } else {
        vec![None]
    };
    check_sweeps(&a, sweep.is_some(), specs.len(), path.is_some())?;
    // Across a link every request costs round trips: fewer, concurrent requests per round.
    let defaults = if a.link.any() {
        config::COMPARE_LAB_DEFAULTS
    } else {
        config::COMPARE_DEFAULTS
    };
    let loads = match &sweep {
        Some(steps) => steps
            .iter()
            .map(|&c| sweep_load(&a.load, defaults, c))
            .collect::<Result<Vec<_>, _>>()?,
        None => vec![config::load_config(&a.load, defaults)?],
    };
    let plan = Plan {
        a: &a,
        chosen: chosen.as_deref(),
        path: path.as_deref(),
        loads: &loads,
        rounds,
        noise_threshold,
        points: specs.len(),
        steps: crate::progress::Steps::new("compare", !a.output.no_progress),
    };
    let mut scenarios = Vec::new();
    let mut points = Vec::new();
    let mut names = Vec::new();
    let mut single = None;
    let mut knee = None;
    for spec in specs {
        let (result, server, link) = plan.at(spec, &mut names)?;
        scenarios.extend(result.scenarios);
        match (result.judged, plan.sweep(), link) {
            (Judged::Knee(k), _, link) => {
                knee = Some(k);
                single = Some((None, server, link));
            }
            (Judged::One(comparison), true, Some(link)) => points.push(compare::RttPoint {
                rtt_set_ms: link.rtt_set_ms,
                link,
                server,
                comparison,
            }),
            (Judged::One(comparison), _, link) => single = Some((Some(comparison), server, link)),
        }
    }
    plan.steps.finish();
    let mut rep = Report::new(scenarios);
    rep.run = Some(crate::host::run_info("compare", started_at));
    if let Some((comparison, server, link)) = single {
        rep.comparison = comparison;
        rep.server = server;
        rep.link = link;
    }
    rep.concurrency_sweep = knee;
    if plan.sweep() {
        rep.rtt_sweep = Some(compare::RttSweep::new(points, &names));
    }
    rep.interrupted = super::interrupted("the rounds that ran whole", &rep);
    let code = emit_checked(&mut rep, &a.output, &thresholds, a.verbose)?;
    // A row in which no request succeeded at all fails the run.
    let code = code.max(super::no_success(&rep, &accepted));
    Ok(super::exit_status(code))
}

/// What every step of a comparison shares (one step, or one per RTT of a sweep).
struct Plan<'a> {
    a: &'a CompareArgs,
    chosen: Option<&'a [Choice]>,
    /// The path on the embedded server, when the comparison runs against it.
    path: Option<&'a str>,
    /// The load of each step of `-c 1,10,50` (one without a sweep).
    loads: &'a [config::LoadConfig],
    rounds: usize,
    noise_threshold: f64,
    /// The links compared across (one without a link); more than one is a sweep.
    points: usize,
    steps: crate::progress::Steps,
}

impl Plan<'_> {
    /// Across more than one link: an RTT sweep.
    fn sweep(&self) -> bool {
        self.points > 1
    }

    /// The rows of a comparison: each strategy against each target (with the embedded server,
    /// its HTTP and its HTTPS listener).
    fn arms(
        &self,
        embedded: Option<&Embedded>,
        prefix: &str,
        load: &config::LoadConfig,
    ) -> anyhow::Result<(Vec<compare::Arm>, Vec<crate::report::finding::Finding>)> {
        let (a, chosen) = (self.a, self.chosen);
        // (group, URL) for each scheme compared.
        let urls: Vec<(String, Option<String>)> = match (embedded, self.path) {
            (Some(e), Some(p)) => vec![
                ("http".into(), Some(e.url(false, p))),
                ("https".into(), Some(e.url(true, p))),
            ],
            _ => {
                let tls = a.url.as_deref().is_some_and(|u| u.starts_with("https://"));
                vec![(if tls { "https" } else { "http" }.into(), a.url.clone())]
            }
        };
        let roots = embedded
            .map(|e| vec![e.srv.ca_der.clone()])
            .unwrap_or_default();
        let targets = urls
            .into_iter()
            .map(|(group, url)| {
                config::request_config(&a.request, url.as_deref(), roots.clone())
                    .map(|r| (group, r))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // A round sends each URL of --urls-from-file once (unless -n or -d says).
        let mut load = load.clone();
        if let Some((_, req)) = targets.first() {
            config::urls_once(&mut load, &a.load, &a.request, req);
        }
        let rows = compare::offers::Rows {
            chosen,
            embedded: embedded.is_some(),
            h2c: a.h2c,
            requests_per_connection: a.requests_per_connection,
            multiplexed_connections: config::connections(a.connections, Strategy::H2)?,
            load: &load,
            prefix,
            steps: &self.steps,
        };
        Ok(rows.arms(&targets)?)
    }

    /// The comparison across one link (or none): the embedded server started when there
    /// is one, the rounds run on the client's side, the server's counts and the link's
    /// report. `names`: the rows' names without the step's RTT.
    fn at(
        &self,
        spec: Option<LinkSpec>,
        names: &mut Vec<String>,
    ) -> anyhow::Result<(Outcome, Option<StatsSnapshot>, Option<LinkReport>)> {
        // Early data on when a strategy sends it, and for the default set, which has
        // close-0rtt and h3-0rtt.
        let early = self
            .chosen
            .map_or(true, |c| c.iter().any(|c| c.strategy.early_data()));
        let embedded = self
            .path
            .map(|_| Embedded::with_early_data(spec, early, self.a.link.chain_bytes(), &self.steps))
            .transpose()?;
        let prefix = spec
            .filter(|_| self.sweep())
            .map(|s| format!("{}ms ", crate::fmt::num(s.rtt.as_secs_f64() * 1000.0)));
        let knee = self.loads.len() > 1;
        let mut arms = Vec::new();
        let mut at = Vec::new();
        let mut left_out = Vec::new();
        for load in self.loads {
            let prefix = match (&prefix, knee) {
                (_, true) => format!("c={} ", load.concurrency),
                (Some(p), false) => p.clone(),
                (None, false) => String::new(),
            };
            let (step, left) = self.arms(embedded.as_ref(), &prefix, load)?;
            if left_out.is_empty() {
                left_out = left;
            }
            at.extend(step.iter().map(|_| load.concurrency));
            if names.is_empty() {
                *names = step
                    .iter()
                    .map(|arm| arm.name[prefix.len()..].to_string())
                    .collect();
            }
            arms.extend(step);
        }
        self.steps
            .set_total((self.points * arms.len() * self.rounds) as u64, true);
        let run = || {
            let how = compare::Rounds {
                rounds: self.rounds,
                server: compare::ServerSide::new(
                    embedded.as_ref().map(|e| &e.srv),
                    &self.a.server_pid,
                ),
                noise_threshold: self.noise_threshold,
                rtt_set_ms: embedded.as_ref().and_then(Embedded::rtt_set_ms),
                steps: &self.steps,
                accepted: super::ok_statuses(&self.a.output)?,
            };
            anyhow::Ok(if knee {
                let sweep = compare::knee::SweepArms {
                    arms: &arms,
                    at: &at,
                };
                let (scenarios, k) = compare::knee::sweep(sweep, &how)?;
                Outcome {
                    scenarios,
                    judged: Judged::Knee(k),
                }
            } else {
                let mut r = compare::run(&arms, &how)?;
                r.comparison.left_out = left_out;
                Outcome {
                    scenarios: r.scenarios,
                    judged: Judged::One(r.comparison),
                }
            })
        };
        let result = on_client(embedded.as_ref(), run)??;
        Ok(match embedded {
            Some(e) => {
                let (s, l) = e.finish();
                (result, Some(s), l)
            }
            None => (result, None, None),
        })
    }
}

/// What one link's rounds gave: the scenarios, and one comparison or a concurrency sweep.
struct Outcome {
    scenarios: Vec<crate::report::ScenarioReport>,
    judged: Judged,
}

enum Judged {
    One(compare::Comparison),
    Knee(crate::report::knee::ConcurrencySweep),
}

/// One step of `-c 1,10,50,200`: unless -n or -d says, each worker sends 25 requests a
/// round (at least the comparison's usual number), so a high step is not all start-up.
fn sweep_load(
    a: &crate::cli::LoadArgs,
    defaults: config::LoadDefaults,
    c: usize,
) -> Result<config::LoadConfig, UsageError> {
    let mut load = config::load_config_at(a, defaults, c)?;
    if a.requests.is_none() && a.duration.is_none() {
        load.stop.requests = Some(defaults.requests.max(25 * c as u64));
    }
    Ok(load)
}

/// One axis swept at a time, and `--server-pid` only for a server given by URL, naming
/// processes that exist.
fn check_sweeps(
    a: &CompareArgs,
    concurrency_sweep: bool,
    links: usize,
    embedded: bool,
) -> Result<(), UsageError> {
    if concurrency_sweep && links > 1 {
        return Err(UsageError(
            "a list of concurrencies (-c) and a list of RTTs (--rtt): sweep one at a time".into(),
        ));
    }
    if a.server_pid.is_empty() {
        return Ok(());
    }
    if embedded {
        return Err(UsageError(
            "--server-pid is for a server given by URL: the embedded server's CPU is read without it"
                .into(),
        ));
    }
    crate::procs::check_pids(&a.server_pid).map_err(UsageError)
}
