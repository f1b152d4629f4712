//! `handshake merge`: the JSON reports of several agents (each `bench --segment I/N`, or
//! earlier merges) become the report of one run. Each scenario's recorder is rebuilt from
//! its lossless form (`raw`: every counter, every histogram), the agents' recorders are
//! added, and the sum is summarized as any run is: counts are sums, percentiles come from
//! the merged histograms. The shape adds up too (workers, requests, rate); the wall time
//! is the longest agent's, CPU the sum.
//!
//! The inputs are put in a canonical order (by segment, host, start) before anything is
//! added, so that merging is independent of the order of the inputs, and associative:
//! an earlier merge carries its agents and its summed recorders, which add up the same.

use std::collections::BTreeMap;
use std::io::Read as _;

use serde_json::Value;

use crate::parse::UsageError;
use crate::record::Phase;
use crate::report::finding::{Cause, Evidence, Finding};
use crate::report::raw::ClientCertificate;
use crate::report::{AgentReport, Report, RunInfo};
use crate::stats::raw::{RawScenario, ScenarioShape};
use crate::stats::summary;
use crate::stats::Recorder;

/// One report read from the inputs.
pub(crate) struct Input {
    /// "FILE", or "FILE (report N)" when a file holds several.
    origin: String,
    agents: Vec<AgentReport>,
    /// (name, lossless form), in the report's order.
    scenarios: Vec<(String, RawScenario)>,
}

/// Every report in a file (or standard input).
pub(crate) fn read(file: &str) -> Result<Vec<Input>, UsageError> {
    let mut text = String::new();
    let name = if file == "-" {
        "standard input".to_string()
    } else {
        file.to_string()
    };
    let res = if file == "-" {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|mut f| f.read_to_string(&mut text))
    };
    res.map_err(|e| UsageError(format!("merge: {name}: {e}")))?;
    let mut docs = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
    loop {
        let at = stream.byte_offset();
        match stream.next() {
            None => break,
            Some(Ok(v)) => docs.push(v),
            Some(Err(e)) => {
                let line = text[at..].trim_start().lines().next().unwrap_or("");
                let shown: String = line.chars().take(80).collect();
                return Err(UsageError(format!(
                    "merge: {name}: not a JSON report at line {} column {}: {e} (the text there: {shown:?})",
                    e.line(),
                    e.column()
                )));
            }
        }
    }
    if docs.is_empty() {
        return Err(UsageError(format!("merge: {name}: no report in it")));
    }
    let several = docs.len() > 1;
    docs.into_iter()
        .enumerate()
        .map(|(i, v)| {
            let origin = if several {
                format!("{name} (report {})", i + 1)
            } else {
                name.clone()
            };
            input(origin, v)
        })
        .collect()
}

fn input(origin: String, v: Value) -> Result<Input, UsageError> {
    let bad = |why: String| UsageError(format!("merge: {origin}: {why}"));
    if v.get("tool").and_then(Value::as_str) != Some("handshake") {
        return Err(bad(
            "not a handshake report (no \"tool\": \"handshake\")".into()
        ));
    }
    // Its lossless figures are read as this version writes them: another schema's may
    // not mean the same.
    let version = v.get("schema_version").and_then(Value::as_u64);
    if version != Some(u64::from(crate::report::SCHEMA_VERSION)) {
        return Err(bad(format!(
            "a report of schema version {}, and this handshake reads version {}: merge the reports with the handshake that wrote them, or run the agents with this one",
            version.map_or("(none)".to_string(), |v| v.to_string()),
            crate::report::SCHEMA_VERSION
        )));
    }
    if v.get("comparison").is_some_and(|c| !c.is_null()) || v.get("rtt_sweep").is_some() {
        return Err(bad(
            "a compare report: merge takes bench reports (a comparison's paired rounds and intervals do not add up across agents)".into(),
        ));
    }
    let Some(list) = v.get("scenarios").and_then(Value::as_array) else {
        return Err(bad("no \"scenarios\" in it".into()));
    };
    let mut scenarios = Vec::new();
    for s in list {
        let name = s
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        let Some(raw) = s.get("raw") else {
            return Err(bad(format!(
                "scenario {name:?} has no lossless figures (\"raw\"): write it with this version's `handshake bench --json`"
            )));
        };
        let raw: RawScenario = serde_json::from_value(raw.clone())
            .map_err(|e| bad(format!("scenario {name:?}: its \"raw\" figures: {e}")))?;
        // Check that its histograms and names can be read now, to name the input.
        Recorder::try_from(&raw.recorder).map_err(|e| bad(format!("scenario {name:?}: {e}")))?;
        scenarios.push((name, raw));
    }
    let agents = match v.get("agents") {
        Some(a) if !a.is_null() => {
            serde_json::from_value(a.clone()).map_err(|e| bad(format!("its \"agents\": {e}")))?
        }
        _ => {
            let run: Option<RunInfo> = match v.get("run") {
                Some(r) => Some(
                    serde_json::from_value(r.clone())
                        .map_err(|e| bad(format!("its \"run\": {e}")))?,
                ),
                None => None,
            };
            vec![agent(run.as_ref(), &scenarios)?]
        }
    };
    Ok(Input {
        origin,
        agents,
        scenarios,
    })
}

/// An agent's row: its identity and its figures over its scenarios.
fn agent(
    run: Option<&RunInfo>,
    scenarios: &[(String, RawScenario)],
) -> Result<AgentReport, UsageError> {
    let mut rec = Recorder::new();
    let mut wall_ns = 0u64;
    let mut cpu_ns = 0u128;
    for (_, raw) in scenarios {
        let mut one = Recorder::try_from(&raw.recorder).map_err(UsageError)?;
        one.ok_status.clone_from(&raw.shape.ok_status);
        rec += &one;
        wall_ns = wall_ns.max(raw.wall_ns);
        cpu_ns += u128::from(raw.cpu_user_ns) + u128::from(raw.cpu_sys_ns);
    }
    let mut latency = rec.phases_new[Phase::Total].clone();
    latency += &rec.phases_reused[Phase::Total];
    Ok(AgentReport {
        host: run.map_or("unknown".into(), |r| r.host.clone()),
        started_at: run.map_or(String::new(), |r| r.started_at.clone()),
        segment: run.and_then(|r| r.segment),
        wall_s: wall_ns as f64 / 1e9,
        requests: rec.counts.attempted,
        ok: rec.ok(),
        errors: rec.errors_total(),
        connections: rec.counts.connections_opened,
        p99_ms: if latency.count > 0 {
            latency.hist.value_at_quantile(0.99) as f64 / 1e6
        } else {
            0.0
        },
        client_cpu_us_per_request: if rec.counts.attempted > 0 {
            cpu_ns as f64 / 1e3 / rec.counts.attempted as f64
        } else {
            0.0
        },
        flags: Vec::new(),
    })
}

/// A figure an agent can stand out by: its code, its words, its name in the report, how
/// it is read, its unit.
type Outlier = (
    &'static str,
    &'static str,
    &'static str,
    fn(&AgentReport) -> f64,
    &'static str,
);

/// What sets agent `a` apart from `all`: errors, and with two agents or more a p99 or a
/// CPU per request above 1.5x the agents' median (an agent on a busy or distant
/// machine), each with its figure and the median.
fn flags(a: &AgentReport, all: &[AgentReport]) -> Vec<Finding> {
    let n = all.len() as u64;
    let median = |f: fn(&AgentReport) -> f64| {
        let mut v: Vec<f64> = all.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let mut out = Vec::new();
    if a.errors > 0 {
        out.push(
            Finding::new(
                "agent_errors",
                Cause::Transport,
                format!("{} errors", a.errors),
            )
            .with(Evidence::count(
                "agents[].errors",
                a.errors,
                a.requests,
                "the agent's attempts",
            )),
        );
    }
    if all.len() < 2 {
        return out;
    }
    let outliers: [Outlier; 2] = [
        (
            "agent_p99_outlier",
            "p99",
            "agents[].p99_ms",
            |a| a.p99_ms,
            "ms",
        ),
        (
            "agent_cpu_outlier",
            "CPU per request",
            "agents[].client_cpu_us_per_request",
            |a| a.client_cpu_us_per_request,
            "µs",
        ),
    ];
    for (code, what, figure, f, unit) in outliers {
        let m = median(f);
        if m > 0.0 && f(a) > 1.5 * m {
            out.push(
                Finding::new(
                    code,
                    Cause::Measured,
                    format!("{what} {:.1}x the median", f(a) / m),
                )
                .with(Evidence::figure(figure, f(a), Some(unit), "the agent"))
                .with(Evidence::mean(
                    &format!("{figure} (median over the agents)"),
                    m,
                    Some(unit),
                    n,
                    "agents",
                )),
            );
        }
    }
    out
}

/// The canonical order of agents: by segment (the whole workload first), host, start.
fn agent_key(a: &AgentReport) -> (u64, u64, String, String) {
    let (i, n) = a.segment.map_or((0, 1), |s| (s.index - 1, s.count));
    // The segment's start as a fraction scaled to a common denominator is not needed:
    // order by start (i/n) through a fixed-point value, then by the pair itself.
    let start = (u128::from(i) * (1u128 << 64) / u128::from(n)) as u64;
    (start, n, a.host.clone(), a.started_at.clone())
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The shapes of one scenario across agents, added: workers, threads, requests and rate
/// are the agents' sums; the rest is the first agent's.
fn add_shape(a: &mut ScenarioShape, b: &ScenarioShape) {
    a.concurrency += b.concurrency;
    a.threads += b.threads;
    a.requests = match (a.requests, b.requests) {
        (Some(x), Some(y)) => Some(x + y),
        _ => None,
    };
    a.rate = match (a.rate, b.rate) {
        (Some(x), Some(y)) => Some(round6(x + y)),
        _ => None,
    };
    a.connect_rate = match (a.connect_rate, b.connect_rate) {
        (Some(x), Some(y)) => Some(round6(x + y)),
        _ => None,
    };
    add_client_certificates(&mut a.client_certificate, b.client_certificate.as_ref());
}

/// Mutual TLS across agents: the handshakes asked and answered, added; the CAs, the
/// subject and the key type are the first agent's that has them.
fn add_client_certificates(a: &mut Option<ClientCertificate>, b: Option<&ClientCertificate>) {
    match (a.as_mut(), b) {
        (Some(x), Some(y)) => {
            x.requested += y.requested;
            x.presented += y.presented;
            if x.acceptable_cas.is_empty() {
                x.acceptable_cas.clone_from(&y.acceptable_cas);
            }
            x.subject = x.subject.take().or_else(|| y.subject.clone());
            x.key_type = x.key_type.take().or_else(|| y.key_type.clone());
        }
        (None, Some(y)) => *a = Some(y.clone()),
        (_, None) => {}
    }
}

/// `rec`'s connections by origin renumbered from its agent's `names` to the merged
/// list `into` (a name it lacks is added).
fn by_origin_name(mut rec: Recorder, names: &[String], into: &mut Vec<String>) -> Recorder {
    if !names.is_empty() {
        rec.opened_by_origin = by_name(&rec.opened_by_origin, names, into);
    }
    rec
}

/// Counts kept by index in an agent's list of `names`, renumbered to the merged list
/// `into` (a name it lacks is added).
fn by_name(counts: &[u64], names: &[String], into: &mut Vec<String>) -> Vec<u64> {
    let mut out = vec![0; into.len()];
    for (i, n) in counts.iter().enumerate() {
        let Some(name) = names.get(i) else {
            continue;
        };
        let j = into.iter().position(|x| x == name).unwrap_or_else(|| {
            into.push(name.clone());
            into.len() - 1
        });
        if j >= out.len() {
            out.resize(j + 1, 0);
        }
        out[j] += n;
    }
    out
}

/// `ok_status`: `--ok-status` given to merge, which decides what counts as ok in place of
/// what each agent was given.
pub(crate) fn merge(
    mut inputs: Vec<Input>,
    allow_mismatch: bool,
    ok_status: Option<&[(u16, u16)]>,
) -> Result<Report, UsageError> {
    for i in &mut inputs {
        i.agents.sort_by_key(agent_key);
    }
    inputs.sort_by_key(|i| i.agents.first().map(agent_key));
    if !allow_mismatch {
        check(&inputs)?;
    }
    // Scenario by scenario, in the first report's order (then any others by name).
    let mut order: Vec<String> = Vec::new();
    let mut merged: BTreeMap<String, (ScenarioShape, Recorder, u64, u64, u64)> = BTreeMap::new();
    for input in &inputs {
        for (name, raw) in &input.scenarios {
            let rec = Recorder::try_from(&raw.recorder)
                .map_err(|e| UsageError(format!("merge: {}: {e}", input.origin)))?;
            match merged.get_mut(name) {
                None => {
                    order.push(name.clone());
                    merged.insert(
                        name.clone(),
                        (
                            raw.shape.clone(),
                            rec,
                            raw.wall_ns,
                            raw.cpu_user_ns,
                            raw.cpu_sys_ns,
                        ),
                    );
                }
                Some((shape, sum, wall, user, sys)) => {
                    // Origins a redirect found (-L) are numbered in the order each agent
                    // met them: counted under their names, not their numbers.
                    let mut rec =
                        by_origin_name(rec, &raw.shape.origin_names, &mut shape.origin_names);
                    // Agents may connect from source addresses of their own.
                    rec.opened_by_source = by_name(
                        &rec.opened_by_source,
                        &raw.shape.local_addrs,
                        &mut shape.local_addrs,
                    );
                    add_shape(shape, &raw.shape);
                    *sum += &rec;
                    *wall = (*wall).max(raw.wall_ns);
                    *user += raw.cpu_user_ns;
                    *sys += raw.cpu_sys_ns;
                }
            }
        }
    }
    let scenarios = order
        .iter()
        .filter_map(|name| merged.remove(name))
        .map(|(mut shape, mut rec, wall, user, sys)| {
            if let Some(o) = ok_status {
                shape.ok_status = o.to_vec();
            }
            rec.ok_status.clone_from(&shape.ok_status);
            summary::summarize_with_raw(
                &shape,
                &rec,
                std::time::Duration::from_nanos(wall),
                crate::cpu::CpuTime {
                    user: std::time::Duration::from_nanos(user),
                    sys: std::time::Duration::from_nanos(sys),
                },
            )
        })
        .collect();
    let mut agents: Vec<AgentReport> = inputs.into_iter().flat_map(|i| i.agents).collect();
    agents.sort_by_key(agent_key);
    let flags: Vec<Vec<Finding>> = agents.iter().map(|a| flags(a, &agents)).collect();
    for (a, f) in agents.iter_mut().zip(flags) {
        a.flags = f;
    }
    let coverage = missing_segments(&agents).into_iter().collect();
    Ok(Report::new(
        crate::report::Kind::Merged { agents, coverage },
        scenarios,
    ))
}

/// "a", "a and b", "a, b and c".
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The most equal shares the workload is cut into to find what no agent ran.
const COVERAGE_GRAIN_MAX: u64 = 100_000;

/// Which shares of the workload no agent ran, where the agents ran segments: a finding
/// naming them (`I/N` where every agent cut the workload in `N`, else the share by
/// percent), or none where they cover it whole.
fn missing_segments(agents: &[AgentReport]) -> Option<Finding> {
    let segs: Vec<crate::report::Segment> = agents.iter().filter_map(|a| a.segment).collect();
    if segs.is_empty() || segs.len() < agents.len() {
        // An agent ran the whole workload: nothing is missing.
        return None;
    }
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let grain = segs.iter().try_fold(1u64, |l, s| {
        let l = l / gcd(l, s.count) * s.count;
        (l <= COVERAGE_GRAIN_MAX).then_some(l)
    })?;
    let mut covered = vec![false; grain as usize];
    for s in &segs {
        let per = grain / s.count;
        for c in &mut covered[((s.index - 1) * per) as usize..(s.index * per) as usize] {
            *c = true;
        }
    }
    let ran = covered.iter().filter(|c| **c).count() as u64;
    if ran == grain {
        return None;
    }
    let one_cut = segs.iter().all(|s| s.count == segs[0].count);
    let named: Vec<String> = if one_cut {
        let n = segs[0].count;
        (1..=n)
            .filter(|i| !segs.iter().any(|s| s.index == *i))
            .map(|i| format!("{i}/{n}"))
            .collect()
    } else {
        // Each run of uncovered grains, by percent of the workload.
        let mut runs = Vec::new();
        let mut k = 0;
        while k < covered.len() {
            if covered[k] {
                k += 1;
                continue;
            }
            let start = k;
            while k < covered.len() && !covered[k] {
                k += 1;
            }
            let pct = |g: usize| crate::fmt::num(g as f64 * 100.0 / grain as f64);
            runs.push(format!("from {} % to {} %", pct(start), pct(k)));
        }
        runs
    };
    let share = crate::fmt::num(ran as f64 * 100.0 / grain as f64);
    let text = format!(
        "No agent ran {} of the workload: the report above is of {share} % of it, not the whole run (an agent that failed or was not merged; merge its report too, or run that segment again).",
        and_list(&named)
    );
    Some(
        Finding::new("segments_missing", Cause::Measured, text).with(Evidence::count(
            "agents.segment",
            ran,
            grain,
            "equal shares of the workload run by an agent",
        )),
    )
}

/// Refuse runs of different workloads, and segments run twice.
fn check(inputs: &[Input]) -> Result<(), UsageError> {
    let first = &inputs[0];
    let describe = |i: &Input| {
        i.scenarios
            .iter()
            .map(|(n, r)| {
                format!(
                    "{n}: {} {} ({})",
                    r.shape.strategy.name(),
                    r.shape.url,
                    r.shape.strategy.protocol()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    for other in &inputs[1..] {
        let same = other.scenarios.len() == first.scenarios.len()
            && other
                .scenarios
                .iter()
                .zip(&first.scenarios)
                .all(|((n1, a), (n2, b))| {
                    n1 == n2
                        && a.shape.url == b.shape.url
                        && a.shape.urls == b.shape.urls
                        && a.shape.strategy == b.shape.strategy
                });
        if !same {
            return Err(UsageError(format!(
                "merge: {} and {} ran different workloads ({} against {}): merge only the agents of one workload, or pass --allow-mismatch",
                first.origin,
                other.origin,
                describe(first),
                describe(other)
            )));
        }
    }
    let all: Vec<(&AgentReport, &str)> = inputs
        .iter()
        .flat_map(|i| i.agents.iter().map(move |a| (a, i.origin.as_str())))
        .collect();
    for (k, (a, oa)) in all.iter().enumerate() {
        for (b, ob) in &all[k + 1..] {
            let overlap = match (a.segment, b.segment) {
                (Some(x), Some(y)) => x.overlaps(y),
                _ => true,
            };
            if overlap {
                let seg = |s: Option<crate::report::Segment>| {
                    s.map_or("the whole workload".to_string(), |s| format!("segment {s}"))
                };
                return Err(UsageError(format!(
                    "merge: {oa} ({}, host {}) and {ob} ({}, host {}) overlap: that share of the workload would count twice; give each agent its own --segment I/N, or pass --allow-mismatch",
                    seg(a.segment),
                    a.host,
                    seg(b.segment),
                    b.host
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two agents' client certificates add up: asked and presented are sums, the
    /// certificate's names are kept; an agent whose server asked nothing adds nothing.
    #[test]
    fn client_certificates_are_added_across_agents() {
        let one = ClientCertificate {
            requested: 3,
            presented: 3,
            acceptable_cas: vec!["CN=ca".into()],
            subject: Some("CN=c".into()),
            key_type: Some("ECDSA P-256".into()),
        };
        let mut sum = None;
        add_client_certificates(&mut sum, Some(&one));
        add_client_certificates(&mut sum, None);
        add_client_certificates(
            &mut sum,
            Some(&ClientCertificate {
                requested: 2,
                presented: 0,
                ..Default::default()
            }),
        );
        let sum = sum.unwrap();
        assert_eq!((sum.requested, sum.presented), (5, 3));
        assert_eq!(sum.subject.as_deref(), Some("CN=c"));
        assert_eq!(sum.acceptable_cas, ["CN=ca"]);
    }
    /// Connections by origin follow the origin's name from one agent's numbering to the
    /// merged one; a name the merge has not seen is added after the others.
    #[test]
    fn connections_by_origin_are_merged_by_name() {
        let mut into = vec!["http://b:80".to_string()];
        let rec = crate::stats::Recorder {
            opened_by_origin: vec![1, 2],
            ..crate::stats::Recorder::new()
        };
        let names = ["http://a:80".to_string(), "http://b:80".to_string()];
        let rec = super::by_origin_name(rec, &names, &mut into);
        assert_eq!(into, ["http://b:80", "http://a:80"]);
        assert_eq!(rec.opened_by_origin, vec![2, 1]);
    }

    /// Connections by source address, the same way: agents with lists of their own.
    #[test]
    fn connections_by_source_are_merged_by_address() {
        let mut into = vec!["127.0.0.2".to_string(), "127.0.0.3".to_string()];
        let names = ["127.0.0.3".to_string(), "127.0.0.4".to_string()];
        let counts = super::by_name(&[5, 7], &names, &mut into);
        assert_eq!(into, ["127.0.0.2", "127.0.0.3", "127.0.0.4"]);
        assert_eq!(counts, vec![0, 5, 7]);
    }

    fn agent(host: &str, errors: u64, p99_ms: f64, cpu: f64) -> AgentReport {
        AgentReport {
            host: host.into(),
            started_at: String::new(),
            segment: None,
            wall_s: 1.0,
            requests: 100,
            ok: 100 - errors,
            errors,
            connections: 10,
            p99_ms,
            client_cpu_us_per_request: cpu,
            flags: Vec::new(),
        }
    }

    #[test]
    fn an_agent_is_flagged_by_its_errors_and_figures_far_above_the_median() {
        let all = [
            agent("a", 0, 1.0, 10.0),
            agent("b", 3, 1.1, 10.0),
            agent("c", 0, 2.0, 16.0),
        ];
        let codes =
            |i: usize| -> Vec<&str> { flags(&all[i], &all).iter().map(|f| f.code).collect() };
        assert!(codes(0).is_empty());
        assert_eq!(codes(1), ["agent_errors"]);
        // 2.0 ms against the median 1.1: 1.8x; 16 µs against 10: 1.6x.
        let f = flags(&all[2], &all);
        assert_eq!(f[0].code, "agent_p99_outlier");
        assert_eq!(f[0].text, "p99 1.8x the median");
        assert_eq!(f[0].evidence[1].value, 1.1);
        assert_eq!(f[1].code, "agent_cpu_outlier");
        // One agent has no median to stand apart from.
        assert!(flags(&all[2], &all[2..]).is_empty());
    }
}
