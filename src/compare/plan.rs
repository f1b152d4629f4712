//! A comparison's plan, resolved once from its arguments (by `config::compare::compare_plan`:
//! strategies, targets, loads or a concurrency sweep, links or an RTT sweep, rounds,
//! thresholds), and its run: the embedded server started per link, the rows built, the
//! rounds run. Nothing here reads the command line.

use crate::compare;
use crate::embedded::{on_client, Embedded};
use crate::lab::LinkSpec;
use crate::plan::build::{LoadConfig, RequestConfig};
use crate::plan::Choice;
use crate::report::link::LinkReport;
use crate::report::server::StatsSnapshot;
use crate::report::Kind;

/// What the rounds gave, for the report.
pub(crate) struct Done {
    pub scenarios: Vec<crate::report::ScenarioReport>,
    /// One comparison, a concurrency sweep or an RTT sweep.
    pub kind: Kind,
    /// Across one link (or none): the embedded server's counts and the link's report (a
    /// sweep's are in each of its points).
    pub server: Option<StatsSnapshot>,
    pub link: Option<LinkReport>,
}

/// A comparison, every flag read and checked before any traffic.
pub(crate) struct Plan {
    /// `--strategies` (none: what the target offers).
    pub chosen: Option<Vec<Choice>>,
    /// The URL given, for a server elsewhere.
    pub url: Option<String>,
    /// The path on the embedded server, when the comparison runs against it.
    pub path: Option<String>,
    /// The request (against the embedded server, aimed at it once it is up).
    pub request: RequestConfig,
    /// The load of each step of `-c 1,10,50` (one without a sweep).
    pub loads: Vec<LoadConfig>,
    /// The links compared across (one `None` without a link); more than one is a sweep.
    pub links: Vec<Option<LinkSpec>>,
    pub rounds: usize,
    pub noise_threshold: f64,
    /// How the report is written and judged.
    pub output: crate::report::Output,
    pub h2c: bool,
    pub requests_per_connection: Option<u64>,
    /// HTTP/2 connections per origin (`--connections`).
    pub multiplexed_connections: usize,
    /// `--server-pid`: the server's processes, whose CPU is read.
    pub server_pids: Vec<u32>,
    /// The embedded server's certificate chain padded to this many bytes.
    pub chain_bytes: Option<usize>,
    pub progress: bool,
    /// `--metrics` and `--remote-write`.
    pub metrics: crate::metrics::publish::MetricsPlan,
    /// Where the rounds' counts go when the metrics are published.
    pub board: Option<std::sync::Arc<crate::metrics::run::Board>>,
}

impl Plan {
    /// Across more than one link: an RTT sweep.
    fn sweep(&self) -> bool {
        self.links.len() > 1
    }

    /// Run the comparison: at each link (or none), the rows' rounds.
    pub(crate) fn run(&self) -> anyhow::Result<Done> {
        let at = At {
            plan: self,
            steps: crate::progress::Steps::new("compare", self.progress),
        };
        let mut scenarios = Vec::new();
        let mut single = None;
        let mut points = Vec::new();
        let mut names = Vec::new();
        for &spec in &self.links {
            let (result, server, link) = at.at(spec, &mut names)?;
            scenarios.extend(result.scenarios);
            match (result.judged, link) {
                (Judged::One(comparison), Some(link)) if self.sweep() => {
                    points.push(compare::RttPoint {
                        rtt_set_ms: link.rtt_set_ms,
                        link,
                        server,
                        comparison,
                    })
                }
                (Judged::One(comparison), link) => {
                    single = Some((Kind::Comparison { comparison }, server, link));
                }
                (Judged::Knee(concurrency_sweep), link) => {
                    single = Some((Kind::ConcurrencySweep { concurrency_sweep }, server, link));
                }
            }
        }
        at.steps.finish();
        let (kind, server, link) = match single {
            _ if self.sweep() => (
                Kind::RttSweep {
                    rtt_sweep: compare::RttSweep::new(points, &names),
                },
                None,
                None,
            ),
            Some(one) => one,
            None => anyhow::bail!("the comparison ran across no link"),
        };
        Ok(Done {
            scenarios,
            kind,
            server,
            link,
        })
    }
}

/// The plan on its way, with its progress line.
struct At<'a> {
    plan: &'a Plan,
    steps: crate::progress::Steps,
}

impl At<'_> {
    /// The rows of a comparison: each strategy against each target (with the embedded server,
    /// its HTTP and its HTTPS listener).
    fn arms(
        &self,
        embedded: Option<&Embedded>,
        prefix: &str,
        load: &LoadConfig,
    ) -> anyhow::Result<(Vec<compare::Arm>, Vec<crate::report::finding::Finding>)> {
        let p = self.plan;
        // The request for each scheme compared (with the embedded server, its HTTP and
        // its HTTPS listener, trusting its CA).
        let targets = match (embedded, &p.path) {
            (Some(e), Some(path)) => vec![
                (
                    "http".to_string(),
                    p.request
                        .aimed_at(&e.url(false, path), e.srv.ca_der.clone())?,
                ),
                (
                    "https".to_string(),
                    p.request
                        .aimed_at(&e.url(true, path), e.srv.ca_der.clone())?,
                ),
            ],
            _ => {
                let tls = p.url.as_deref().is_some_and(|u| u.starts_with("https://"));
                let group = if tls { "https" } else { "http" };
                vec![(group.to_string(), p.request.clone())]
            }
        };
        let rows = compare::offers::Rows {
            chosen: p.chosen.as_deref(),
            embedded: embedded.is_some(),
            h2c: p.h2c,
            requests_per_connection: p.requests_per_connection,
            multiplexed_connections: p.multiplexed_connections,
            ok_status: &p.output.accepted,
            load,
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
        let p = self.plan;
        let early = p
            .chosen
            .as_ref()
            .is_none_or(|c| c.iter().any(|c| c.strategy.early_data()));
        let embedded = p
            .path
            .as_ref()
            .map(|_| {
                let cert = p.request.tls.client_auth.identity.is_some();
                Embedded::with_early_data(spec, early, p.chain_bytes, cert, &self.steps)
            })
            .transpose()?;
        let prefix = spec
            .filter(|_| p.sweep())
            .map(|s| format!("{}ms ", crate::fmt::num(s.rtt.as_secs_f64() * 1000.0)));
        let knee = p.loads.len() > 1;
        let mut arms = Vec::new();
        let mut at = Vec::new();
        let mut left_out = Vec::new();
        for load in &p.loads {
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
            .set_total((p.links.len() * arms.len() * p.rounds) as u64, true);
        let run = || {
            let how = compare::Rounds {
                rounds: p.rounds,
                server: compare::ServerSide::new(embedded.as_ref().map(|e| &e.srv), &p.server_pids),
                noise_threshold: p.noise_threshold,
                rtt_set_ms: embedded.as_ref().and_then(Embedded::rtt_set_ms),
                steps: &self.steps,
                board: p.board.clone(),
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
