//! Self-contained HTML reports: one file each, no network fetches. The numbers are
//! embedded as JSON and drawn by a small inline script as SVG charts and tables.
//!
//! `bench` and `compare`: the verdict and `--fail-if` checks first; time per request;
//! for compare, each row against the best of its group with its confidence interval;
//! where a mean request's time goes; the phases on new and on reused connections side
//! by side; the connections block (opened, reuse, requests per connection, TLS full and
//! resumed, 0-RTT, close reasons); errors by category with their details and status
//! codes; the latency distribution; each scenario's timeline; each scenario's
//! diagnosis.
//!
//! `audit`: the verdict, the clients' connections (in total and per client address),
//! and the timeline of connections and requests.
//!
//! Every figure shown from the report carries its JSON path (`data-path`, a JSON array)
//! and its value (`data-value`), so that the browser check can hold it to the JSON.

use serde::Serialize;

use super::comparison::ComparisonRow;
use super::thresholds::ThresholdResult;
use super::{
    AgentReport, ConnectionsReport, Kind, PhaseGroup, Report, RequestsReport, RunInfo,
    TimelineBucket,
};
use crate::report::audit::AuditReport;

/// One scenario of a bench or compare report.
#[derive(Debug, Serialize)]
struct Entry<'a> {
    name: &'a str,
    group: &'a str,
    /// Time per request (one worker's view), ms: the comparison's median when there is
    /// one; in an open loop, where the rate sets the pace, the mean latency.
    time_ms: f64,
    /// Mean per-request time of each phase, ms.
    phases: Vec<(&'static str, f64)>,
    /// `[percentile, ms]` pairs.
    percentiles: &'a [[f64; 2]],
    ok: u64,
    requests_per_s: f64,
    phases_new: &'a PhaseGroup,
    phases_reused: &'a PhaseGroup,
    connections: &'a ConnectionsReport,
    requests: &'a RequestsReport,
    diagnosis: &'a [super::finding::Finding],
    /// compare: this scenario's row of the comparison.
    row: Option<&'a ComparisonRow>,
    /// Second by second (compare: the strategy's rounds end to end).
    timeline: &'a [TimelineBucket],
    /// The windows in which a hop could not be reached (drawn on the timeline), and the
    /// sentences the text report says of them and of the restarts seen.
    outages: &'a [crate::record::outage::Outage],
    outage_lines: Vec<String>,
}

/// compare: how rows are set against the best.
#[derive(Debug, Serialize)]
struct Confidence {
    confidence: f64,
    noise_threshold: f64,
    rounds: usize,
}

#[derive(Debug, Serialize)]
struct Data<'a> {
    kind: &'static str,
    title: String,
    generated_by: String,
    /// What the run was: its URLs, when, the command line, the machine.
    run: Option<&'a RunInfo>,
    /// The sentences the report opens with: compare's per group, else bench's per
    /// scenario.
    headline: Vec<String>,
    /// What the bars of time per request show.
    time_label: &'static str,
    /// The parts of a request's time, in report order (the page draws and lists them).
    phases: Vec<&'static str>,
    /// With `--rtt`: the link as set and measured (one line per RTT of a sweep).
    links: Vec<String>,
    entries: Vec<Entry<'a>>,
    /// `compare --rtt A,B,...`: time per request against RTT, one line per strategy.
    sweep: Option<Sweep<'a>>,
    /// `compare -c 1,10,50,...`: requests/s and latency against concurrency, the knees.
    knee: Option<&'a super::knee::ConcurrencySweep>,
    confidence: Option<Confidence>,
    /// compare: the comparison's sentences (why the rows differ).
    verdict: Vec<&'a str>,
    thresholds: Option<&'a [ThresholdResult]>,
    /// `merge`: the agents, each with why it stands out (if it does).
    agents: Option<Vec<(&'a AgentReport, Vec<String>)>>,
}

#[derive(Debug, Serialize)]
struct Sweep<'a> {
    rtts_ms: Vec<f64>,
    series: Vec<(&'a str, &'a [f64])>,
}

/// compare's sentences: each knee's verdict, then why the rows differ.
fn verdict<'a>(
    report: &'a Report,
    comparisons: &[&'a super::comparison::Comparison],
) -> Vec<&'a str> {
    let knees = match &report.kind {
        Kind::ConcurrencySweep { concurrency_sweep } => concurrency_sweep.series.as_slice(),
        _ => &[],
    };
    knees
        .iter()
        .map(|s| s.verdict.text.as_str())
        .chain(
            comparisons
                .iter()
                .flat_map(|c| c.explanations.iter().map(|f| f.text.as_str())),
        )
        .collect()
}

/// The sentences a bench or compare page opens with: that the run was interrupted, if it
/// was; then the comparisons' headlines, else each scenario's.
fn headline(report: &Report, comparisons: &[&super::comparison::Comparison]) -> Vec<String> {
    let cut = report.interrupted.iter().map(|i| i.text.clone());
    let lines: Vec<String> = if comparisons.is_empty() {
        report
            .scenarios
            .iter()
            .filter_map(|s| s.headline.as_ref().map(|h| h.text.clone()))
            .collect()
    } else {
        comparisons
            .iter()
            .flat_map(|c| {
                c.headline
                    .iter()
                    .map(|f| f.text.clone())
                    .chain(c.left_out.iter().map(|f| f.text.clone()))
            })
            .collect()
    };
    cut.chain(lines).collect()
}

/// One scenario's entry in the page's data (with its comparison row, if any).
fn entry<'a>(s: &'a super::ScenarioReport, row: Option<&'a ComparisonRow>) -> Entry<'a> {
    let own = if s.load.rate.is_some() {
        s.latency_ms.mean
    } else if s.requests.answered > 0 {
        s.time_per_request_ms()
    } else {
        0.0
    };
    Entry {
        name: &s.name,
        group: row.map_or("", |r| r.group.as_str()),
        time_ms: row.map_or(own, |r| r.time_per_request_ms.median),
        phases: s.phases_ms.mean_per_request.parts(),
        percentiles: &s.latency_ms.percentiles,
        ok: s.requests.ok,
        requests_per_s: s.throughput.requests_per_s,
        phases_new: &s.phases_ms.new,
        phases_reused: &s.phases_ms.reused,
        connections: &s.connections,
        requests: &s.requests,
        diagnosis: &s.diagnosis,
        row,
        timeline: &s.timeline,
        outages: &s.outages.windows,
        outage_lines: super::text::outage_lines(&s.outages),
    }
}

fn data(report: &Report) -> Data<'_> {
    let comparisons = report.comparisons();
    let open_loop = report.scenarios.iter().any(|s| s.load.rate.is_some());
    let entries = report
        .scenarios
        .iter()
        .map(|s| {
            let row = comparisons
                .iter()
                .find_map(|c| c.rows.iter().find(|r| r.name == s.name));
            entry(s, row)
        })
        .collect();
    let title = match &report.kind {
        Kind::ConcurrencySweep { .. } => "handshake compare across concurrency".to_string(),
        Kind::RttSweep { .. } => "handshake compare across round-trip times".to_string(),
        Kind::Comparison { .. } => "handshake compare".to_string(),
        Kind::Bench {} | Kind::Merged { .. } => format!(
            "handshake bench {}",
            report
                .scenarios
                .first()
                .map(|s| s.url.as_str())
                .unwrap_or("")
        ),
    };
    let (rtt_sweep, knee, agents) = match &report.kind {
        Kind::RttSweep { rtt_sweep } => (Some(rtt_sweep), None, None),
        Kind::ConcurrencySweep { concurrency_sweep } => (None, Some(concurrency_sweep), None),
        Kind::Merged { agents, .. } => (None, None, Some(agents)),
        Kind::Bench {} | Kind::Comparison { .. } => (None, None, None),
    };
    let links = report
        .link
        .iter()
        .chain(
            rtt_sweep
                .iter()
                .flat_map(|sw| sw.points.iter().map(|p| &p.link)),
        )
        .map(|l| l.describe())
        .collect();
    let sweep = rtt_sweep.map(|sw| Sweep {
        rtts_ms: sw.points.iter().map(|p| p.rtt_set_ms).collect(),
        series: sw
            .series
            .iter()
            .map(|x| (x.name.as_str(), x.time_per_request_ms.as_slice()))
            .collect(),
    });
    let headline = headline(report, &comparisons);
    Data {
        kind: "bench",
        title,
        generated_by: format!("{} {}", report.tool, report.version),
        run: report.run.as_ref(),
        headline,
        phases: crate::record::Phase::parts().map(|p| p.name()).collect(),
        time_label: if !comparisons.is_empty() {
            "Time per request (ms): the median over the rounds of concurrency × wall time ÷ answered requests"
        } else if open_loop {
            "Mean latency (ms): in an open loop the rate sets the pace, so each request's own time is shown"
        } else {
            "Time per request (ms): concurrency × wall time ÷ answered requests"
        },
        links,
        entries,
        sweep,
        knee,
        confidence: comparisons.first().map(|c| Confidence {
            confidence: c.confidence,
            noise_threshold: c.noise_threshold,
            rounds: c.rounds,
        }),
        verdict: verdict(report, &comparisons),
        thresholds: report.thresholds.as_deref(),
        agents: agents.map(|all| {
            all.iter()
                .map(|a| (a, a.flags.iter().map(|f| f.text.clone()).collect()))
                .collect()
        }),
    }
}

#[derive(Debug, Serialize)]
struct AuditData<'a> {
    kind: &'static str,
    title: String,
    generated_by: String,
    run: Option<&'a RunInfo>,
    headline: Vec<String>,
    report: &'a AuditReport,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('{', "&#123;")
}

/// The page: `body` and `script` (after the shared helpers) with `data` embedded.
fn page(title: &str, data: &impl Serialize, body: &str, script: &str) -> String {
    // Inside <script>, "</" must not appear; JSON allows "\/" for "/".
    // "{{" only occurs inside JSON strings: written as "{\u007b" it cannot be taken
    // for a placeholder.
    let json = serde_json::to_string(data)
        .expect("report data serializes")
        .replace("</", "<\\/")
        .replace("{{", "{\\u007b");
    TEMPLATE
        .replace("{{STYLE}}", STYLE)
        .replace("{{BODY}}", body)
        .replace("{{SCRIPT}}", &PAGE_SCRIPT.replace("/*{{PAGE}}*/", script))
        .replace("{{TITLE}}", &escape(title))
        .replace("{{DATA}}", &json)
}

/// The `bench` / `compare` report.
pub(crate) fn render(report: &Report) -> String {
    let d = data(report);
    page(&d.title, &d, BENCH_BODY, BENCH_SCRIPT)
}

/// The `audit` report.
pub(crate) fn render_audit(report: &AuditReport) -> String {
    let d = AuditData {
        kind: "audit",
        title: format!("handshake audit {}", report.url),
        generated_by: format!("{} {}", report.tool, report.version),
        run: report.run.as_ref(),
        headline: report
            .interrupted
            .iter()
            .map(|i| i.text.clone())
            .chain([report.headline.text.clone()])
            .collect(),
        report,
    };
    page(&d.title, &d, AUDIT_BODY, AUDIT_SCRIPT)
}

/// The page around every report: its title, style, body and script are filled in.
const TEMPLATE: &str = include_str!("page/page.html");
const STYLE: &str = include_str!("page/page.css");
/// The helpers every page's script uses; the page's own script goes at `/*{{PAGE}}*/`.
const PAGE_SCRIPT: &str = include_str!("page/page.js");
const BENCH_BODY: &str = include_str!("page/bench.html");
const BENCH_SCRIPT: &str = include_str!("page/bench.js");
const AUDIT_BODY: &str = include_str!("page/audit.html");
const AUDIT_SCRIPT: &str = include_str!("page/audit.js");
