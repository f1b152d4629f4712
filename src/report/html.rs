//! Self-contained HTML report for `bench` and `compare`: one file, no network fetches.
//! The numbers are embedded as JSON and drawn as SVG by a small inline script: a bar
//! chart of time per request, a stacked bar per strategy of where a mean request's time
//! goes (dns, connect, tls, send, wait, receive), the latency distributions, and each
//! scenario's timeline (requests/s and new connections/s with error markers on one time
//! axis, p50 and p99 latency on another).

use serde::Serialize;

use super::Report;

/// One bar / line of the charts.
#[derive(Debug, Serialize)]
struct Entry<'a> {
    name: &'a str,
    group: &'a str,
    /// Time per request (one worker's view), ms: the comparison's median when there is one.
    time_ms: f64,
    /// Mean per-request time of each phase, ms.
    phases: [(&'static str, f64); 8],
    /// `[percentile, ms]` pairs.
    percentiles: &'a [[f64; 2]],
    connections: u64,
    ok: u64,
    /// Second by second (compare: the strategy's rounds end to end).
    timeline: &'a [super::TimelineBucket],
}

#[derive(Debug, Serialize)]
struct Data<'a> {
    title: String,
    generated_by: String,
    /// With `--rtt`: the link as set and measured (one line per RTT of a sweep).
    links: Vec<String>,
    entries: Vec<Entry<'a>>,
    /// `compare --rtt A,B,...`: time per request against RTT, one line per strategy.
    sweep: Option<Sweep<'a>>,
    explanations: Vec<&'a str>,
}

#[derive(Debug, Serialize)]
struct Sweep<'a> {
    rtts_ms: Vec<f64>,
    series: Vec<(&'a str, &'a [f64])>,
}

fn data(report: &Report) -> Data<'_> {
    let comparisons = report.comparisons();
    let entries = report
        .scenarios
        .iter()
        .map(|s| {
            let row = comparisons
                .iter()
                .find_map(|c| c.rows.iter().find(|r| r.name == s.name));
            let own = if s.requests.ok > 0 {
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
                connections: s.connections.opened,
                ok: s.requests.ok,
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
        title,
        generated_by: format!("{} {}", report.tool, report.version),
        links,
        entries,
        sweep,
        explanations: comparisons
            .iter()
            .flat_map(|c| c.explanations.iter().map(String::as_str))
            .chain(
                report
                    .scenarios
                    .iter()
                    .flat_map(|s| s.diagnosis.iter().map(String::as_str)),
            )
            .collect(),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub fn render(report: &Report) -> String {
    let d = data(report);
    // Inside <script>, "</" must not appear; JSON allows "\/" for "/".
    let json = serde_json::to_string(&d)
        .expect("report data serializes")
        .replace("</", "<\\/");
    TEMPLATE
        .replace("{{TITLE}}", &escape(&d.title))
        .replace("{{DATA}}", &json)
}

const TEMPLATE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{TITLE}}</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1100px; }
  h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
  svg text { font: 12px system-ui, sans-serif; fill: #222; }
  table { border-collapse: collapse; } td, th { padding: 2px 10px; text-align: right; }
  td:first-child, th:first-child { text-align: left; }
  .legend span { display: inline-block; margin-right: 14px; }
  .legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
  footer { margin-top: 32px; color: #777; font-size: 12px; }
</style>
</head>
<body>
<h1 id="title">{{TITLE}}</h1>
<ul id="links"></ul>
<div id="sweep-section" hidden>
<h2>Time per request (ms) against round-trip time</h2>
<svg id="sweep" role="img" aria-label="time per request against round-trip time"></svg>
</div>
<h2>Time per request (ms)</h2>
<svg id="bars" role="img" aria-label="time per request"></svg>
<h2>Where a mean request's time goes (ms)</h2>
<div class="legend" id="legend"></div>
<svg id="stacked" role="img" aria-label="phases per request"></svg>
<h2>Latency distribution (ms by percentile, tail stretched)</h2>
<svg id="latency" role="img" aria-label="latency distribution"></svg>
<div id="timeline-section" hidden>
<h2>Timeline: requests/s and new connections/s (errors marked), then p50 and p99 latency</h2>
<div id="timelines"></div>
</div>
<h2>Numbers</h2>
<table id="numbers"><thead><tr><th>strategy</th><th>ms/request</th><th>connections</th><th>ok</th><th>p50 ms</th><th>p99 ms</th></tr></thead><tbody></tbody></table>
<ul id="explanations"></ul>
<footer id="footer"></footer>
<script type="application/json" id="handshake-data">{{DATA}}</script>
<script>
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("handshake-data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const COLORS = { dns: "#8e6bbf", connect: "#e07b39", tls: "#d64545", h2_setup: "#b8860b", quic_handshake: "#c0392b", send: "#6aa84f", wait: "#3d85c6", receive: "#45b5aa" };
  const LINE_COLORS = ["#3d85c6", "#d64545", "#6aa84f", "#e07b39", "#8e6bbf", "#45b5aa", "#999", "#c27ba0", "#f1c232", "#222"];
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
  const entries = data.entries;
  const label = 190, width = 760, row = 26;

  // 1. Bars of time per request.
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

  // 2. Stacked phases of a mean request.
  const legend = document.getElementById("legend");
  for (const [p, c] of Object.entries(COLORS)) {
    const s = document.createElement("span");
    s.innerHTML = '<i style="background:' + c + '"></i>' + p;
    legend.appendChild(s);
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

  // 3. Latency distribution: ms by percentile, one line per strategy.
  const lat = document.getElementById("latency");
  const W = 760, H = 300, left = 60, top = 10;
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

  // 4. compare --rtt A,B,...: time per request against RTT, one line per strategy.
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
  // 5. Timelines: per scenario with two buckets or more (open when there is one).
  const withTimeline = entries.filter(e => e.timeline.length >= 2);
  if (withTimeline.length) document.getElementById("timeline-section").hidden = false;
  withTimeline.forEach(e => {
    const box = document.createElement("details");
    box.open = withTimeline.length === 1;
    const summary = document.createElement("summary");
    summary.textContent = e.name;
    box.appendChild(summary);
    document.getElementById("timelines").appendChild(box);
    const tl = e.timeline;
    const end = Math.max(...tl.map(b => b.t_s + b.width_s), 1e-9);
    const xT = t => left + t / end * W;
    const mid = b => b.t_s + b.width_s / 2;
    function chart(cls, series, unit, markers) {
      const svg = document.createElementNS(NS, "svg");
      svg.setAttribute("class", cls);
      svg.setAttribute("data-name", e.name);
      svg.setAttribute("width", left + W + 200);
      svg.setAttribute("height", H / 2 + 50);
      box.appendChild(svg);
      const h = H / 2;
      const maxY = Math.max(...series.flatMap(s => s.values.filter(v => v !== null)), 1e-9);
      el("line", { x1: left, y1: top + h, x2: left + W, y2: top + h, stroke: "#999" }, svg);
      el("line", { x1: left, y1: top, x2: left, y2: top + h, stroke: "#999" }, svg);
      for (let k = 0; k <= 4; k++) text(svg, xT(end * k / 4), top + h + 16, fmt(end * k / 4) + " s", "middle");
      for (let k = 0; k <= 2; k++) text(svg, left - 6, top + h - k / 2 * h + 4, fmt(maxY * k / 2) + unit, "end");
      series.forEach((s, i) => {
        const pts = [];
        s.values.forEach((v, j) => { if (v !== null) pts.push(xT(mid(tl[j])).toFixed(1) + "," + (top + h - v / maxY * h).toFixed(1)); });
        el("polyline", { class: s.cls, points: pts.join(" "), fill: "none", stroke: s.color, "stroke-width": 2, "data-name": e.name, "data-values": s.values.map(v => v === null ? "" : v).join(",") }, svg);
        el("rect", { x: left + W + 14, y: top + i * 18, width: 12, height: 12, fill: s.color }, svg);
        text(svg, left + W + 32, top + i * 18 + 11, s.label);
      });
      if (markers) {
        tl.forEach(b => {
          if (b.errors > 0) {
            const m = el("path", { class: "error-marker", d: "M" + xT(mid(b)).toFixed(1) + "," + (top + 2) + " l5,9 l-10,0 z", fill: "#d64545", "data-name": e.name, "data-t": b.t_s, "data-errors": b.errors }, svg);
            const title = el("title", {}, m);
            title.textContent = b.errors + " errors at " + fmt(b.t_s) + " s: " + Object.entries(b.errors_by_kind).map(([k, n]) => k + " " + n).join(", ");
          }
        });
        if (tl.some(b => b.errors > 0)) {
          el("path", { d: "M" + (left + W + 20) + "," + (top + 2 * 18) + " l5,9 l-10,0 z", fill: "#d64545" }, svg);
          text(svg, left + W + 32, top + 2 * 18 + 11, "errors");
        }
      }
    }
    chart("timeline-rates", [
      { cls: "rate-requests", label: "requests/s", color: "#3d85c6", values: tl.map(b => b.width_s > 0 ? b.requests / b.width_s : 0) },
      { cls: "rate-new", label: "new connections/s", color: "#e07b39", values: tl.map(b => b.width_s > 0 ? b.new_connections / b.width_s : 0) },
    ], "", true);
    chart("timeline-latency", [
      { cls: "lat-p50", label: "p50", color: "#6aa84f", values: tl.map(b => b.p50_ms) },
      { cls: "lat-p99", label: "p99", color: "#d64545", values: tl.map(b => b.p99_ms) },
    ], " ms", false);
  });

  const links = document.getElementById("links");
  for (const s of data.links) {
    const li = document.createElement("li");
    li.textContent = "Link: " + s;
    links.appendChild(li);
  }

  // Numbers and explanations.
  const tbody = document.querySelector("#numbers tbody");
  const pct = (e, q) => { const p = e.percentiles.find(p => p[0] === q); return p ? fmt(p[1]) : "-"; };
  for (const e of entries) {
    const tr = document.createElement("tr");
    for (const v of [e.name, fmt(e.time_ms), e.connections, e.ok, pct(e, 50), pct(e, 99)]) {
      const td = document.createElement("td");
      td.textContent = String(v);
      tr.appendChild(td);
    }
    tbody.appendChild(tr);
  }
  const ul = document.getElementById("explanations");
  for (const s of data.explanations) {
    const li = document.createElement("li");
    li.textContent = s;
    ul.appendChild(li);
  }
  document.getElementById("footer").textContent = "Generated by " + data.generated_by;
  document.body.setAttribute("data-drawn", "true");
})();
</script>
</body>
</html>
"##;
