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
use super::{AgentReport, ConnectionsReport, PhaseGroup, Report, RequestsReport, TimelineBucket};
use crate::cmd::audit::AuditReport;

/// One scenario of a bench or compare report.
#[derive(Debug, Serialize)]
struct Entry<'a> {
    name: &'a str,
    group: &'a str,
    /// Time per request (one worker's view), ms: the comparison's median when there is
    /// one; in an open loop, where the rate sets the pace, the mean latency.
    time_ms: f64,
    /// Mean per-request time of each phase, ms.
    phases: [(&'static str, f64); 8],
    /// `[percentile, ms]` pairs.
    percentiles: &'a [[f64; 2]],
    ok: u64,
    phases_new: &'a PhaseGroup,
    phases_reused: &'a PhaseGroup,
    connections: &'a ConnectionsReport,
    requests: &'a RequestsReport,
    diagnosis: &'a [String],
    /// compare: this scenario's row of the comparison.
    row: Option<&'a ComparisonRow>,
    /// Second by second (compare: the strategy's rounds end to end).
    timeline: &'a [TimelineBucket],
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
    /// What the bars of time per request show.
    time_label: &'static str,
    /// With `--rtt`: the link as set and measured (one line per RTT of a sweep).
    links: Vec<String>,
    entries: Vec<Entry<'a>>,
    /// `compare --rtt A,B,...`: time per request against RTT, one line per strategy.
    sweep: Option<Sweep<'a>>,
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
            let own = if s.load.rate.is_some() {
                s.latency_ms.mean
            } else if s.requests.ok > 0 {
                s.concurrency as f64 * s.duration_s * 1000.0 / s.requests.ok as f64
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
                phases_new: &s.phases_ms.new,
                phases_reused: &s.phases_ms.reused,
                connections: &s.connections,
                requests: &s.requests,
                diagnosis: &s.diagnosis,
                row,
                timeline: &s.timeline,
            }
        })
        .collect();
    let title = match (&report.comparison, &report.rtt_sweep) {
        (_, Some(_)) => "handshake compare across round-trip times".to_string(),
        (Some(_), None) => "handshake compare".to_string(),
        (None, None) => format!(
            "handshake bench {}",
            report
                .scenarios
                .first()
                .map(|s| s.url.as_str())
                .unwrap_or("")
        ),
    };
    let links = report
        .link
        .iter()
        .chain(
            report
                .rtt_sweep
                .iter()
                .flat_map(|sw| sw.points.iter().map(|p| &p.link)),
        )
        .map(|l| l.describe())
        .collect();
    let sweep = report.rtt_sweep.as_ref().map(|sw| Sweep {
        rtts_ms: sw.points.iter().map(|p| p.rtt_set_ms).collect(),
        series: sw
            .series
            .iter()
            .map(|x| (x.name.as_str(), x.time_per_request_ms.as_slice()))
            .collect(),
    });
    Data {
        kind: "bench",
        title,
        generated_by: format!("{} {}", report.tool, report.version),
        time_label: if !comparisons.is_empty() {
            "Time per request (ms): the median over the rounds of concurrency × wall time ÷ ok requests"
        } else if open_loop {
            "Mean latency (ms): in an open loop the rate sets the pace, so each request's own time is shown"
        } else {
            "Time per request (ms): concurrency × wall time ÷ ok requests"
        },
        links,
        entries,
        sweep,
        confidence: comparisons.first().map(|c| Confidence {
            confidence: c.confidence,
            noise_threshold: c.noise_threshold,
            rounds: c.rounds,
        }),
        verdict: comparisons
            .iter()
            .flat_map(|c| c.explanations.iter().map(String::as_str))
            .collect(),
        thresholds: report.thresholds.as_deref(),
        agents: report.agents.as_ref().map(|all| {
            all.iter()
                .map(|a| (a, super::text::agent_flags(a, all)))
                .collect()
        }),
    }
}

#[derive(Debug, Serialize)]
struct AuditData<'a> {
    kind: &'static str,
    title: String,
    generated_by: String,
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
        .replace("{{BODY}}", body)
        .replace("{{SCRIPT}}", script)
        .replace("{{TITLE}}", &escape(title))
        .replace("{{DATA}}", &json)
}

/// The `bench` / `compare` report.
pub fn render(report: &Report) -> String {
    let d = data(report);
    page(&d.title, &d, BENCH_BODY, BENCH_SCRIPT)
}

/// The `audit` report.
pub fn render_audit(report: &AuditReport) -> String {
    let d = AuditData {
        kind: "audit",
        title: format!("handshake audit {}", report.url),
        generated_by: format!("{} {}", report.tool, report.version),
        report,
    };
    page(&d.title, &d, AUDIT_BODY, AUDIT_SCRIPT)
}

const TEMPLATE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{TITLE}}</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1180px; }
  h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; } h3 { font-size: 14px; margin: 14px 0 4px; }
  svg text { font: 12px system-ui, sans-serif; fill: #222; }
  table { border-collapse: collapse; margin: 6px 0; } td, th { padding: 2px 10px; text-align: right; vertical-align: top; }
  td:first-child, th:first-child { text-align: left; }
  thead th { border-bottom: 1px solid #ccc; } th.sub { font-weight: normal; color: #555; }
  td { white-space: nowrap; } th { font-size: 13px; } td.text { text-align: left; }
  td.list { text-align: left; max-width: 300px; white-space: normal; } .kv { display: inline-block; margin-right: 10px; white-space: nowrap; }
  .muted { color: #777; } .failed { color: #b00020; font-weight: 600; } .held { color: #2e7d32; }
  .legend span { display: inline-block; margin-right: 14px; }
  .legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
  ul.sentences li { margin: 4px 0; }
  footer { margin-top: 32px; color: #777; font-size: 12px; }
</style>
</head>
<body>
<h1 id="title">{{TITLE}}</h1>
{{BODY}}
<footer id="footer"></footer>
<script type="application/json" id="handshake-data">{{DATA}}</script>
<script>
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("handshake-data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const LINE_COLORS = ["#3d85c6", "#d64545", "#6aa84f", "#e07b39", "#8e6bbf", "#45b5aa", "#999", "#c27ba0", "#f1c232", "#222"];
  const left = 60, W = 760, H = 300, top = 10;
  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, s, anchor) {
    const t = el("text", { x: x, y: y, "text-anchor": anchor || "start" }, parent);
    t.textContent = s;
    return t;
  }
  function fmt(v) { return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toFixed(3); }
  // An HTML element, with its text when given.
  function h(tag, attrs, parent, content) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (content !== undefined) e.textContent = String(content);
    if (parent) parent.appendChild(e);
    return e;
  }
  // A figure of the report: `name` is its scenario or client, `path` its place in the
  // JSON; shown as a count, "num" (fmt) or "pct" (a ratio in %).
  function fig(parent, tag, name, path, value, unit) {
    const shown = unit === "num" ? fmt(value) : unit === "pct" ? (value * 100).toFixed(1) + " %" : String(value);
    return h(tag, { class: "fig", "data-name": name, "data-path": JSON.stringify(path), "data-value": value, "data-unit": unit || "count" }, parent, shown);
  }
  // One "key value" per non-zero entry of a map of counts, in a cell.
  function kvs(cell, name, path, map) {
    const keys = Object.keys(map || {}).filter(k => map[k] > 0);
    if (!keys.length) { h("span", { class: "muted" }, cell, "-"); return; }
    for (const k of keys) {
      const s = h("span", { class: "kv" }, cell, k + " ");
      fig(s, "b", name, path.concat([k]), map[k]);
    }
  }
  function sentences(ul, list, cls, name) {
    for (const s of list) {
      const li = h("li", { class: cls }, ul, s);
      if (name !== undefined) li.setAttribute("data-name", name);
    }
  }
  function table(parent, id, heads) {
    const t = h("table", id ? { id: id } : {}, parent);
    const tr = h("tr", {}, h("thead", {}, t));
    for (const c of heads) h("th", {}, tr, c);
    return h("tbody", {}, t);
  }
  function thresholdsList(list) {
    if (!list) return;
    document.getElementById("thresholds-section").hidden = false;
    const ul = document.getElementById("thresholds");
    for (const r of list) {
      const li = h("li", { class: "threshold " + (r.failed ? "failed" : "held"), "data-failed": r.failed, "data-expr": r.expr, "data-value": r.value }, ul);
      li.textContent = (r.failed ? "FAILED " : "passed ") + r.expr + (r.scenario ? " for " + r.scenario : "") + ": " + r.figure + " is " + fmt(r.value);
    }
  }
  // A time chart in `box`: one polyline per series over the buckets `tl` ({t_s, width_s}),
  // values null where there is none; with `markers`, a triangle on each bucket with errors.
  function timeChart(box, cls, name, tl, series, unit, markers) {
    const end = Math.max(...tl.map(b => b.t_s + b.width_s), 1e-9);
    const xT = t => left + t / end * W;
    const mid = b => b.t_s + b.width_s / 2;
    const svg = el("svg", { class: cls, "data-name": name, width: left + W + 200, height: H / 2 + 50 }, box);
    const hh = H / 2;
    const maxY = Math.max(...series.flatMap(s => s.values.filter(v => v !== null)), 1e-9);
    el("line", { x1: left, y1: top + hh, x2: left + W, y2: top + hh, stroke: "#999" }, svg);
    el("line", { x1: left, y1: top, x2: left, y2: top + hh, stroke: "#999" }, svg);
    for (let k = 0; k <= 4; k++) text(svg, xT(end * k / 4), top + hh + 16, fmt(end * k / 4) + " s", "middle");
    for (let k = 0; k <= 2; k++) text(svg, left - 6, top + hh - k / 2 * hh + 4, fmt(maxY * k / 2) + unit, "end");
    series.forEach((s, i) => {
      const pts = [];
      s.values.forEach((v, j) => { if (v !== null) pts.push(xT(mid(tl[j])).toFixed(1) + "," + (top + hh - v / maxY * hh).toFixed(1)); });
      el("polyline", { class: s.cls, points: pts.join(" "), fill: "none", stroke: s.color, "stroke-width": 2, "data-name": name, "data-values": s.values.map(v => v === null ? "" : v).join(",") }, svg);
      el("rect", { x: left + W + 14, y: top + i * 18, width: 12, height: 12, fill: s.color }, svg);
      text(svg, left + W + 32, top + i * 18 + 11, s.label);
    });
    if (markers && tl.some(b => b.errors > 0)) {
      tl.forEach(b => {
        if (b.errors > 0) {
          const m = el("path", { class: "error-marker", d: "M" + xT(mid(b)).toFixed(1) + "," + (top + 2) + " l5,9 l-10,0 z", fill: "#d64545", "data-name": name, "data-t": b.t_s, "data-errors": b.errors }, svg);
          el("title", {}, m).textContent = b.errors + " errors at " + fmt(b.t_s) + " s: " + Object.entries(b.errors_by_kind).map(([k, n]) => k + " " + n).join(", ");
        }
      });
      const y = top + series.length * 18;
      el("path", { d: "M" + (left + W + 20) + "," + y + " l5,9 l-10,0 z", fill: "#d64545" }, svg);
      text(svg, left + W + 32, y + 9, "errors");
    }
  }
  // Rates over each bucket's real width; a last bucket shorter than half the one before
  // (the run ended just past a boundary) is drawn with that one, not as its own point:
  // a few events over a sliver of a second are no rate.
  const perSecond = (tl, f) => {
    const v = tl.map(b => b.width_s > 0 ? f(b) / b.width_s : 0);
    const n = tl.length;
    if (n >= 2 && tl[n - 1].width_s < tl[n - 2].width_s / 2) {
      v[n - 2] = (f(tl[n - 2]) + f(tl[n - 1])) / (tl[n - 2].width_s + tl[n - 1].width_s);
      v[n - 1] = null;
    }
    return v;
  };
{{SCRIPT}}
  document.getElementById("footer").textContent = "Generated by " + data.generated_by;
  document.body.setAttribute("data-drawn", "true");
})();
</script>
</body>
</html>
"##;

const BENCH_BODY: &str = r##"<ul id="links"></ul>
<section id="verdict-section" hidden><h2>Verdict</h2><ul class="sentences" id="verdict"></ul></section>
<section id="thresholds-section" hidden><h2>Thresholds (--fail-if)</h2><ul id="thresholds"></ul></section>
<section id="agents-section" hidden><h2>Agents: the report is their sum</h2><div id="agents"></div></section>
<section id="sweep-section" hidden>
<h2>Time per request (ms) against round-trip time</h2>
<svg id="sweep" role="img" aria-label="time per request against round-trip time"></svg>
</section>
<h2 id="bars-title"></h2>
<svg id="bars" role="img" aria-label="time per request"></svg>
<section id="ci-section" hidden>
<h2 id="ci-title"></h2>
<svg id="ci" role="img" aria-label="times slower than the best with confidence intervals"></svg>
<div id="ci-tables"></div>
</section>
<h2>Where a mean request's time goes (ms)</h2>
<div class="legend" id="legend"></div>
<svg id="stacked" role="img" aria-label="phases per request"></svg>
<h2>Phases on new and on reused connections (mean ms of each phase)</h2>
<p class="muted">A request on a new connection pays dns, connect and tls (or the QUIC handshake); one on a reused connection does not. Each bar shows the mean of every phase the group's requests went through.</p>
<svg id="split" role="img" aria-label="phases on new and reused connections"></svg>
<div id="split-tables"></div>
<h2>Connections</h2>
<div id="connections"></div>
<h2>Requests and errors</h2>
<div id="errors"></div>
<h2>Latency distribution (ms by percentile, tail stretched)</h2>
<svg id="latency" role="img" aria-label="latency distribution"></svg>
<section id="timeline-section" hidden>
<h2>Timeline: requests/s and new connections/s (errors marked), then p50 and p99 latency</h2>
<div id="timelines"></div>
</section>
<section id="diagnosis-section" hidden><h2>Diagnosis</h2><div id="diagnosis"></div></section>
<h2>Numbers</h2>
<table id="numbers"><thead><tr><th>strategy</th><th>ms/request</th><th>connections</th><th>ok</th><th>p50 ms</th><th>p99 ms</th></tr></thead><tbody></tbody></table>
"##;

const BENCH_SCRIPT: &str = r##"
  const COLORS = { blocked: "#bbb", dns: "#8e6bbf", connect: "#e07b39", tls: "#d64545", h2_setup: "#b8860b", quic_handshake: "#c0392b", send: "#6aa84f", wait: "#3d85c6", receive: "#45b5aa" };
  const PHASES = ["blocked", "dns", "connect", "tls", "h2_setup", "quic_handshake", "send", "wait", "receive"];
  const entries = data.entries;
  const label = 190, width = 760, row = 26;

  for (const s of data.links) h("li", {}, document.getElementById("links"), "Link: " + s);
  if (data.verdict.length) {
    document.getElementById("verdict-section").hidden = false;
    sentences(document.getElementById("verdict"), data.verdict, "verdict");
  }
  thresholdsList(data.thresholds);

  // merge: a row per agent; one that stands out says why.
  if (data.agents) {
    document.getElementById("agents-section").hidden = false;
    const tb = table(document.getElementById("agents"), "agents-table", ["segment", "host", "started", "requests", "ok", "errors", "connections", "p99 ms", "wall s", "CPU µs/request", ""]);
    data.agents.forEach(([a, flags], i) => {
      const n = "agent " + i, tr = h("tr", { class: "agent" + (flags.length ? " failed" : ""), "data-name": n }, tb);
      h("td", {}, tr, a.segment ? a.segment.index + "/" + a.segment.count : "all");
      h("td", { class: "text" }, tr, a.host);
      h("td", { class: "text" }, tr, a.started_at);
      for (const k of ["requests", "ok", "errors", "connections"]) fig(h("td", {}, tr), "span", n, [k], a[k]);
      for (const k of ["p99_ms", "wall_s", "client_cpu_us_per_request"]) fig(h("td", {}, tr), "span", n, [k], a[k], "num");
      h("td", { class: "agent-flags" }, tr, flags.join(", "));
    });
  }

  // Bars of time per request.
  document.getElementById("bars-title").textContent = data.time_label;
  const bars = document.getElementById("bars");
  bars.setAttribute("width", label + width + 90);
  bars.setAttribute("height", entries.length * row + 10);
  const maxT = Math.max(...entries.map(e => e.time_ms), 1e-9);
  entries.forEach((e, i) => {
    const y = 5 + i * row;
    text(bars, label - 8, y + 15, e.name, "end");
    const w = Math.max(1, e.time_ms / maxT * width);
    el("rect", { class: "bar", x: label, y: y + 3, width: w, height: row - 8, fill: "#3d85c6", "data-name": e.name, "data-value": e.time_ms }, bars);
    text(bars, label + w + 6, y + 15, fmt(e.time_ms) + " ms");
  });

  // compare: each row against the best of its group, on a log scale of the ratio, with
  // its interval and the band of no difference; then the table of the same.
  const rows = entries.filter(e => e.row);
  if (rows.length && data.confidence) {
    const cf = data.confidence;
    document.getElementById("ci-section").hidden = false;
    document.getElementById("ci-title").textContent = "Against the best of its group: times slower, with the " + Math.round(cf.confidence * 100) + " % confidence interval over " + cf.rounds + " paired rounds (within ±" + Math.round(cf.noise_threshold * 100) + " % is no difference)";
    const svg = document.getElementById("ci");
    const lows = rows.flatMap(e => [e.row.times_slower].concat(e.row.times_slower_ci || []));
    const lo = Math.min(1 - cf.noise_threshold, ...lows) / 1.1, hi = Math.max(1 + cf.noise_threshold, ...lows) * 1.1;
    const xR = r => label + (Math.log(r) - Math.log(lo)) / (Math.log(hi) - Math.log(lo)) * width;
    const hgt = rows.length * row + 30;
    svg.setAttribute("width", label + width + 200);
    svg.setAttribute("height", hgt);
    el("rect", { x: xR(1 - cf.noise_threshold), y: 0, width: xR(1 + cf.noise_threshold) - xR(1 - cf.noise_threshold), height: hgt - 24, fill: "#eee" }, svg);
    el("line", { x1: xR(1), y1: 0, x2: xR(1), y2: hgt - 24, stroke: "#999" }, svg);
    for (const t of [0.5, 0.8, 1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100, 200, 500]) if (t >= lo && t <= hi) text(svg, xR(t), hgt - 8, t + "x", "middle");
    rows.forEach((e, i) => {
      const r = e.row, y = 5 + i * row + 10;
      text(svg, label - 8, y + 4, e.name, "end");
      if (r.times_slower_ci) el("line", { class: "ci", x1: xR(r.times_slower_ci[0]), y1: y, x2: xR(r.times_slower_ci[1]), y2: y, stroke: "#3d85c6", "stroke-width": 3, "data-name": e.name, "data-lo": r.times_slower_ci[0], "data-hi": r.times_slower_ci[1] }, svg);
      el("circle", { class: "ci-estimate", cx: xR(r.times_slower), cy: y, r: 4, fill: r.significant ? "#d64545" : "#3d85c6", "data-name": e.name, "data-value": r.times_slower }, svg);
      const ci = r.times_slower_ci ? " [" + r.times_slower_ci[0].toFixed(2) + "–" + r.times_slower_ci[1].toFixed(2) + "]" : "";
      text(svg, label + width + 10, y + 4, r.failed_rounds > 0 ? "failed" : r.best ? "best" : r.times_slower.toFixed(2) + "x" + ci);
    });
    const box = document.getElementById("ci-tables");
    const groups = [...new Set(rows.map(e => e.group))];
    for (const g of groups) {
      if (groups.length > 1) h("h3", {}, box, g);
      const tb = table(box, null, ["strategy", "ms/request median", "min–max over rounds", "times slower [CI]", "extra ms/request [CI]", "verdict"]);
      for (const e of rows.filter(e => e.group === g)) {
        const r = e.row, tr = h("tr", { class: "ci-row", "data-name": e.name }, tb);
        h("td", {}, tr, e.name);
        fig(h("td", {}, tr), "span", e.name, ["comparison", "time_per_request_ms", "median"], r.time_per_request_ms.median, "num");
        h("td", {}, tr, fmt(r.time_per_request_ms.min) + "–" + fmt(r.time_per_request_ms.max));
        const ts = h("td", {}, tr);
        fig(ts, "span", e.name, ["comparison", "times_slower"], r.times_slower, "num");
        h("span", { class: "muted" }, ts, r.times_slower_ci ? " [" + r.times_slower_ci.map(v => v.toFixed(2)).join("–") + "]" : " (no interval: " + r.rounds_ms.length + " rounds, 6 needed)");
        const ex = h("td", {}, tr);
        fig(ex, "span", e.name, ["comparison", "extra_ms_per_request"], r.extra_ms_per_request, "num");
        h("span", { class: "muted" }, ex, r.extra_ms_per_request_ci ? " [" + r.extra_ms_per_request_ci.map(fmt).join(" – ") + "]" : "");
        const verdict = r.failed_rounds > 0 ? "failed: no request succeeded in " + r.failed_rounds + " of " + r.rounds_ms.length + " rounds"
          : r.best ? "best"
          : !r.times_slower_ci ? "not enough rounds to judge (" + r.rounds_ms.length + " of 6)"
          : r.repeat_of && !r.significant ? "no difference from " + r.repeat_of + " (the same strategy again)"
          : r.significant ? (r.times_slower >= 1 ? "slower" : "faster") : "no difference (within the noise)";
        h("td", { class: "ci-verdict", "data-name": e.name }, tr, verdict);
      }
    }
  }

  // Stacked phases of a mean request.
  const legend = document.getElementById("legend");
  for (const [p, c] of Object.entries(COLORS)) {
    if (p === "blocked") continue;
    const s = h("span", {}, legend);
    h("i", { style: "background:" + c }, s);
    s.appendChild(document.createTextNode(p));
  }
  const stacked = document.getElementById("stacked");
  stacked.setAttribute("width", label + width + 90);
  stacked.setAttribute("height", entries.length * row + 10);
  const totals = entries.map(e => e.phases.reduce((a, p) => a + p[1], 0));
  const maxS = Math.max(...totals, 1e-9);
  entries.forEach((e, i) => {
    const y = 5 + i * row;
    text(stacked, label - 8, y + 15, e.name, "end");
    let x = label;
    for (const [p, v] of e.phases) {
      const w = v / maxS * width;
      el("rect", { class: "phase", x: x, y: y + 3, width: w, height: row - 8, fill: COLORS[p], "data-name": e.name, "data-phase": p, "data-value": v }, stacked);
      x += w;
    }
    text(stacked, x + 6, y + 15, fmt(totals[i]) + " ms");
  });

  // Phases on new and on reused connections: two stacked bars per scenario, then a
  // table per scenario with both side by side.
  const split = document.getElementById("split");
  const kinds = [["new", "phases_new"], ["reused", "phases_reused"]];
  const sumOf = g => PHASES.reduce((a, p) => a + (g[p].count > 0 ? g[p].mean : 0), 0);
  const maxSplit = Math.max(...entries.flatMap(e => kinds.map(([, k]) => sumOf(e[k]))), 1e-9);
  split.setAttribute("width", label + width + 150);
  split.setAttribute("height", entries.length * (2 * row - 6) + 10);
  entries.forEach((e, i) => {
    kinds.forEach(([kind, key], j) => {
      const g = e[key], y = 5 + i * (2 * row - 6) + j * (row - 6);
      text(split, label - 8, y + 13, (j === 0 ? e.name + " " : "") + kind + " (" + g.requests + ")", "end");
      let x = label;
      for (const p of PHASES) {
        if (g[p].count === 0) continue;
        const w = g[p].mean / maxSplit * width;
        const r = el("rect", { class: "split", x: x, y: y + 2, width: w, height: row - 10, fill: COLORS[p], "data-name": e.name, "data-kind": kind, "data-phase": p, "data-value": g[p].mean }, split);
        el("title", {}, r).textContent = kind + " " + p + ": " + fmt(g[p].mean) + " ms mean over " + g[p].count;
        x += w;
      }
      text(split, x + 6, y + 13, g.requests ? fmt(sumOf(g)) + " ms" : "none");
    });
  });
  const splitBox = document.getElementById("split-tables");
  for (const e of entries) {
    const d = h("details", {}, splitBox);
    d.open = entries.length === 1;
    h("summary", {}, d, e.name + ": " + e.phases_new.requests + " requests on new connections, " + e.phases_reused.requests + " on reused ones");
    const t = h("table", { class: "split-table", "data-name": e.name }, d);
    const th = h("thead", {}, t);
    const r1 = h("tr", {}, th);
    h("th", {}, r1, "");
    h("th", { colspan: 5 }, r1, "new connections");
    h("th", { colspan: 5 }, r1, "reused connections");
    const r2 = h("tr", {}, th);
    h("th", {}, r2, "phase (ms)");
    for (let k = 0; k < 2; k++) for (const c of ["count", "mean", "p50", "p99", "max"]) h("th", { class: "sub" }, r2, c);
    const tb = h("tbody", {}, t);
    for (const p of PHASES.concat(["total"])) {
      if (p !== "total" && e.phases_new[p].count === 0 && e.phases_reused[p].count === 0) continue;
      const tr = h("tr", {}, tb);
      h("td", {}, tr, p);
      for (const [kind, key] of kinds) {
        const s = e[key][p];
        fig(h("td", {}, tr), "span", e.name, ["phases_ms", kind, p, "count"], s.count);
        for (const c of ["mean", "p50", "p99", "max"]) {
          const td = h("td", {}, tr);
          if (s.count > 0) fig(td, "span", e.name, ["phases_ms", kind, p, c], s[c], "num");
          else h("span", { class: "muted" }, td, "-");
        }
      }
    }
  }

  // Connections: one row per scenario.
  const conns = table(document.getElementById("connections"), "connections-table", ["strategy", "opened", "reused requests", "reuse ratio", "requests/connection min / mean / max", "TLS full", "TLS resumed", "0-RTT accepted / rejected", "stale retries", "close reasons", "more"]);
  for (const e of entries) {
    const c = e.connections, tr = h("tr", { "data-name": e.name }, conns);
    const cell = () => h("td", {}, tr);
    h("td", {}, tr, e.name);
    fig(cell(), "span", e.name, ["connections", "opened"], c.opened);
    fig(cell(), "span", e.name, ["connections", "reused_requests"], c.reused_requests);
    fig(cell(), "span", e.name, ["connections", "reuse_ratio"], c.reuse_ratio, "pct");
    const rpc = cell();
    fig(rpc, "span", e.name, ["connections", "requests_per_connection", "min"], c.requests_per_connection.min);
    rpc.appendChild(document.createTextNode(" / "));
    fig(rpc, "span", e.name, ["connections", "requests_per_connection", "mean"], c.requests_per_connection.mean, "num");
    rpc.appendChild(document.createTextNode(" / "));
    fig(rpc, "span", e.name, ["connections", "requests_per_connection", "max"], c.requests_per_connection.max);
    fig(cell(), "span", e.name, ["connections", "tls_handshakes", "full"], c.tls_handshakes.full);
    fig(cell(), "span", e.name, ["connections", "tls_handshakes", "resumed"], c.tls_handshakes.resumed);
    const ed = cell();
    if (c.early_data.attempted > 0) {
      fig(ed, "span", e.name, ["connections", "early_data", "accepted"], c.early_data.accepted);
      ed.appendChild(document.createTextNode(" / "));
      fig(ed, "span", e.name, ["connections", "early_data", "rejected"], c.early_data.rejected);
    } else h("span", { class: "muted" }, ed, "-");
    fig(cell(), "span", e.name, ["requests", "retries", "stale_connection"], e.requests.retries.stale_connection);
    kvs(h("td", { class: "list" }, tr), e.name, ["connections", "close_reasons"], c.close_reasons);
    const more = h("td", { class: "list" }, tr);
    const item = (k, path, v, unit) => { const s = h("span", { class: "kv" }, more, k + " "); fig(s, "b", e.name, path, v, unit); };
    if (c.server_ignored_close > 0) item("server ignored close", ["connections", "server_ignored_close"], c.server_ignored_close);
    if (c.h2) {
      item("peak streams on one connection", ["connections", "h2", "peak_concurrent_streams", "max"], c.h2.peak_concurrent_streams.max);
      item("refused-stream retries", ["requests", "retries", "refused_stream"], e.requests.retries.refused_stream);
      for (const [k, v] of Object.entries(c.h2.goaway_codes)) item("GOAWAY " + k, ["connections", "h2", "goaway_codes", k], v);
    }
    if (c.quic) {
      item("QUIC handshake mean ms", ["connections", "quic", "handshake_ms", "mean"], c.quic.handshake_ms.mean, "num");
      item("QUIC packets lost", ["connections", "quic", "packets_lost"], c.quic.packets_lost);
      if (c.quic.peak_concurrent_streams) item("peak streams on one connection", ["connections", "quic", "peak_concurrent_streams", "max"], c.quic.peak_concurrent_streams.max);
    }
    if (!more.childNodes.length) h("span", { class: "muted" }, more, "-");
  }

  // Requests and errors: one row per scenario, errors by category and by detail.
  const errs = table(document.getElementById("errors"), "errors-table", ["strategy", "attempted", "ok", "errors by category", "error details", "status codes", "aborted at the deadline", "late sends"]);
  for (const e of entries) {
    const r = e.requests, tr = h("tr", { "data-name": e.name }, errs);
    h("td", {}, tr, e.name);
    fig(h("td", {}, tr), "span", e.name, ["requests", "attempted"], r.attempted);
    fig(h("td", {}, tr), "span", e.name, ["requests", "ok"], r.ok);
    kvs(h("td", { class: "list" }, tr), e.name, ["requests", "errors"], r.errors);
    kvs(h("td", { class: "list" }, tr), e.name, ["requests", "error_details"], r.error_details);
    kvs(h("td", { class: "list" }, tr), e.name, ["requests", "status_codes"], r.status_codes);
    fig(h("td", {}, tr), "span", e.name, ["requests", "aborted_at_deadline"], r.aborted_at_deadline);
    fig(h("td", {}, tr), "span", e.name, ["requests", "late_sends"], r.late_sends);
  }

  // Latency distribution: ms by percentile, one line per strategy.
  const lat = document.getElementById("latency");
  lat.setAttribute("width", left + W + 200);
  lat.setAttribute("height", H + 50);
  const maxL = Math.max(...entries.flatMap(e => e.percentiles.map(p => p[1])), 1e-9);
  el("line", { x1: left, y1: top + H, x2: left + W, y2: top + H, stroke: "#999" }, lat);
  el("line", { x1: left, y1: top, x2: left, y2: top + H, stroke: "#999" }, lat);
  // The usual HDR "nines" scale: p50, p90, p99, p99.9 equally spaced; max at the end.
  const NINES = 3.3;
  const xOf = q => left + (q >= 100 ? NINES : Math.min(NINES, -Math.log10(1 - q / 100))) / NINES * W;
  for (const [q, name] of [[0, "p0"], [50, "p50"], [90, "p90"], [99, "p99"], [99.9, "p99.9"], [100, "max"]]) text(lat, xOf(q), top + H + 16, name, "middle");
  for (let k = 0; k <= 4; k++) text(lat, left - 6, top + H - k / 4 * H + 4, fmt(maxL * k / 4), "end");
  entries.forEach((e, i) => {
    const color = LINE_COLORS[i % LINE_COLORS.length];
    const pts = e.percentiles.map(p => xOf(p[0]).toFixed(1) + "," + (top + H - p[1] / maxL * H).toFixed(1)).join(" ");
    el("polyline", { class: "latency", points: pts, fill: "none", stroke: color, "stroke-width": 2, "data-name": e.name }, lat);
    el("rect", { x: left + W + 14, y: top + i * 18, width: 12, height: 12, fill: color }, lat);
    text(lat, left + W + 32, top + i * 18 + 11, e.name);
  });

  // compare --rtt A,B,...: time per request against RTT, one line per strategy.
  if (data.sweep) {
    document.getElementById("sweep-section").hidden = false;
    const sw = document.getElementById("sweep");
    sw.setAttribute("width", left + W + 200);
    sw.setAttribute("height", H + 50);
    const rtts = data.sweep.rtts_ms;
    const maxR = Math.max(...rtts, 1e-9);
    const maxY = Math.max(...data.sweep.series.flatMap(s => s[1]), 1e-9);
    const xR = r => left + r / maxR * W;
    el("line", { x1: left, y1: top + H, x2: left + W, y2: top + H, stroke: "#999" }, sw);
    el("line", { x1: left, y1: top, x2: left, y2: top + H, stroke: "#999" }, sw);
    for (const r of rtts) text(sw, xR(r), top + H + 16, (Number.isInteger(r) ? String(r) : fmt(r)) + " ms", "middle");
    text(sw, left + W, top + H + 34, "RTT", "end");
    for (let k = 0; k <= 4; k++) text(sw, left - 6, top + H - k / 4 * H + 4, fmt(maxY * k / 4), "end");
    data.sweep.series.forEach(([name, values], i) => {
      const color = LINE_COLORS[i % LINE_COLORS.length];
      const pts = values.map((v, j) => xR(rtts[j]).toFixed(1) + "," + (top + H - v / maxY * H).toFixed(1)).join(" ");
      el("polyline", { class: "sweep", points: pts, fill: "none", stroke: color, "stroke-width": 2, "data-name": name, "data-values": values.join(",") }, sw);
      values.forEach((v, j) => el("circle", { cx: xR(rtts[j]).toFixed(1), cy: (top + H - v / maxY * H).toFixed(1), r: 3, fill: color }, sw));
      el("rect", { x: left + W + 14, y: top + i * 18, width: 12, height: 12, fill: color }, sw);
      text(sw, left + W + 32, top + i * 18 + 11, name);
    });
  }

  // Timelines: per scenario with two buckets or more (open when there is one).
  const withTimeline = entries.filter(e => e.timeline.length >= 2);
  if (withTimeline.length) document.getElementById("timeline-section").hidden = false;
  withTimeline.forEach(e => {
    const box = h("details", {}, document.getElementById("timelines"));
    box.open = withTimeline.length === 1;
    h("summary", {}, box, e.name);
    const tl = e.timeline;
    timeChart(box, "timeline-rates", e.name, tl, [
      { cls: "rate-requests", label: "requests/s", color: "#3d85c6", values: perSecond(tl, b => b.requests) },
      { cls: "rate-new", label: "new connections/s", color: "#e07b39", values: perSecond(tl, b => b.new_connections) },
    ], "", true);
    timeChart(box, "timeline-latency", e.name, tl, [
      { cls: "lat-p50", label: "p50", color: "#6aa84f", values: tl.map(b => b.p50_ms) },
      { cls: "lat-p99", label: "p99", color: "#d64545", values: tl.map(b => b.p99_ms) },
    ], " ms", false);
  });

  // Each scenario's diagnosis.
  const withDiagnosis = entries.filter(e => e.diagnosis.length);
  if (withDiagnosis.length) document.getElementById("diagnosis-section").hidden = false;
  for (const e of withDiagnosis) {
    const box = document.getElementById("diagnosis");
    if (entries.length > 1) h("h3", {}, box, e.name);
    sentences(h("ul", { class: "sentences" }, box), e.diagnosis, "diagnosis", e.name);
  }

  // Numbers.
  const tbody = document.querySelector("#numbers tbody");
  // compare: a scenario's counts are over all its rounds (the table of rows above has them per round).
  if (data.confidence) document.querySelector("#numbers thead th:nth-child(3)").textContent = "connections (all " + data.confidence.rounds + " rounds)";
  const pct = (e, q) => { const p = e.percentiles.find(p => p[0] === q); return p ? fmt(p[1]) : "-"; };
  for (const e of entries) {
    const tr = h("tr", {}, tbody);
    for (const v of [e.name, fmt(e.time_ms), e.connections.opened, e.ok, pct(e, 50), pct(e, 99)]) h("td", {}, tr, v);
  }
"##;

const AUDIT_BODY: &str = r##"<ul id="about"></ul>
<section id="verdict-section"><h2>Verdict</h2><ul class="sentences" id="verdict"></ul></section>
<section id="thresholds-section" hidden><h2>Thresholds (--fail-if)</h2><ul id="thresholds"></ul></section>
<h2>Requests per connection</h2>
<p class="muted">Each client's connections and the requests they carried: one request per connection is no reuse at all.</p>
<svg id="rpc" role="img" aria-label="requests and connections per client"></svg>
<h2>Connections</h2>
<div id="clients"></div>
<section id="timeline-section" hidden>
<h2>Timeline: connections opened and ended, requests (per second), then TLS handshakes</h2>
<div id="timelines"></div>
</section>
"##;

const AUDIT_SCRIPT: &str = r##"
  const r = data.report;
  const about = document.getElementById("about");
  if (r.command) h("li", { id: "command" }, about, "Command: " + r.command.join(" ") + " (exit status " + (r.exit_status === null ? "-" : r.exit_status) + ")");
  const peak = h("li", {}, about, "Peak concurrent connections: ");
  fig(peak, "b", "report", ["peak_concurrent_connections"], r.peak_concurrent_connections);
  sentences(document.getElementById("verdict"), r.verdict, "verdict");
  thresholdsList(r.thresholds);
  // The clients: in total, then each address when there are several.
  const clients = [r.total].concat(r.clients.length > 1 ? r.clients : []);
  const name = c => c.client === "all" ? "all" : c.client;

  // Connections and requests per client, to one scale.
  const svg = document.getElementById("rpc");
  const label = 190, width = 700, row = 22;
  svg.setAttribute("width", label + width + 200);
  svg.setAttribute("height", clients.length * 2 * row + 10);
  const maxN = Math.max(...clients.flatMap(c => [c.connections, c.requests]), 1e-9);
  clients.forEach((c, i) => {
    [["connections", "#e07b39"], ["requests", "#3d85c6"]].forEach(([k, color], j) => {
      const y = 5 + (2 * i + j) * row;
      text(svg, label - 8, y + 13, (j === 0 ? (c.client === "all" ? "all clients" : c.client) + " " : "") + k, "end");
      const w = Math.max(1, c[k] / maxN * width);
      el("rect", { class: "count-bar", x: label, y: y + 2, width: w, height: row - 6, fill: color, "data-name": name(c), "data-key": k, "data-value": c[k] }, svg);
      text(svg, label + w + 6, y + 13, String(c[k]));
    });
  });

  // The connections block per client.
  const box = document.getElementById("clients");
  for (const c of clients) {
    const n = name(c);
    h("h3", {}, box, c.client === "all" ? "All clients" : "Client " + c.client);
    const t = h("table", { class: "client", "data-name": n }, box);
    const add = (label, fill) => { const tr = h("tr", {}, t); h("th", {}, tr, label); fill(h("td", { class: "list" }, tr)); };
    const one = (path, unit) => cell => fig(cell, "span", n, path, path.reduce((o, k) => o[k], c), unit);
    add("connections", one(["connections"]));
    add("requests", cell => { fig(cell, "span", n, ["requests"], c.requests); cell.appendChild(document.createTextNode(" (answered ")); fig(cell, "span", n, ["responses"], c.responses); cell.appendChild(document.createTextNode(")")); });
    add("reuse ratio", one(["reuse_ratio"], "pct"));
    add("requests/connection min / mean / max", cell => {
      fig(cell, "span", n, ["requests_per_connection", "min"], c.requests_per_connection.min);
      cell.appendChild(document.createTextNode(" / "));
      fig(cell, "span", n, ["requests_per_connection", "mean"], c.requests_per_connection.mean, "num");
      cell.appendChild(document.createTextNode(" / "));
      fig(cell, "span", n, ["requests_per_connection", "max"], c.requests_per_connection.max);
    });
    add("unused connections", one(["unused_connections"]));
    add("TLS handshakes full / resumed", cell => { fig(cell, "span", n, ["tls_handshakes", "full"], c.tls_handshakes.full); cell.appendChild(document.createTextNode(" / ")); fig(cell, "span", n, ["tls_handshakes", "resumed"], c.tls_handshakes.resumed); });
    add("how connections ended", cell => kvs(cell, n, ["endings"], c.endings));
    add("HTTP versions", cell => kvs(cell, n, ["http_versions"], c.http_versions));
    add("Connection headers", cell => kvs(cell, n, ["connection_headers"], c.connection_headers));
    add("idle gaps between requests (ms)", cell => {
      if (!c.idle_gaps.count) { h("span", { class: "muted" }, cell, "-"); return; }
      for (const k of ["min_ms", "mean_ms", "max_ms"]) { const s = h("span", { class: "kv" }, cell, k.replace("_ms", "") + " "); fig(s, "b", n, ["idle_gaps", k], c.idle_gaps[k], "num"); }
      const s = h("span", { class: "kv" }, cell, "gaps ");
      fig(s, "b", n, ["idle_gaps", "count"], c.idle_gaps.count);
    });
    add("responses cut off by the client", cell => {
      fig(cell, "span", n, ["cut_responses", "count"], c.cut_responses.count);
      if (c.cut_responses.count) { cell.appendChild(document.createTextNode(" (body bytes written ")); fig(cell, "span", n, ["cut_responses", "body_bytes_written"], c.cut_responses.body_bytes_written); cell.appendChild(document.createTextNode(" of ")); fig(cell, "span", n, ["cut_responses", "body_bytes_total"], c.cut_responses.body_bytes_total); cell.appendChild(document.createTextNode(")")); }
    });
    if (c.h2) add("HTTP/2 connections / streams / peak streams on one", cell => {
      fig(cell, "span", n, ["h2", "connections"], c.h2.connections); cell.appendChild(document.createTextNode(" / "));
      fig(cell, "span", n, ["h2", "streams"], c.h2.streams); cell.appendChild(document.createTextNode(" / "));
      fig(cell, "span", n, ["h2", "peak_concurrent_streams"], c.h2.peak_concurrent_streams);
    });
  }

  // The timeline.
  const tl = r.timeline;
  if (tl.length >= 2) {
    document.getElementById("timeline-section").hidden = false;
    const box = document.getElementById("timelines");
    timeChart(box, "timeline-rates", "all", tl, [
      { cls: "rate-new", label: "new connections/s", color: "#e07b39", values: perSecond(tl, b => b.new_connections) },
      { cls: "rate-closed", label: "ended connections/s", color: "#999", values: perSecond(tl, b => b.closed_connections) },
      { cls: "rate-requests", label: "requests/s", color: "#3d85c6", values: perSecond(tl, b => b.requests) },
    ], "", false);
    if (tl.some(b => b.tls_full + b.tls_resumed > 0)) timeChart(box, "timeline-tls", "all", tl, [
      { cls: "rate-tls-full", label: "full TLS handshakes/s", color: "#d64545", values: perSecond(tl, b => b.tls_full) },
      { cls: "rate-tls-resumed", label: "resumed TLS handshakes/s", color: "#6aa84f", values: perSecond(tl, b => b.tls_resumed) },
    ], "", false);
  }
"##;
