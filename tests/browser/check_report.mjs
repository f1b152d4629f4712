// Opens a handshake HTML report in headless Chromium (Debian's /usr/bin/chromium) and
// checks that it draws the JSON report's numbers and that the page logs no error and
// fetches nothing. Usage: node check_report.mjs REPORT.html REPORT.json [SCREENSHOT.png]
// REPORT.json is `bench`'s or `compare`'s report, or `audit`'s.
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [html, json, shot] = process.argv.slice(2);
const report = JSON.parse(readFileSync(json, "utf8"));
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({
  executablePath,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const failures = [];
const problems = [];
const close = (a, b) => Math.abs(a - b) <= 1e-9 + 1e-6 * Math.abs(b);
// A timeline's rates as the page must draw them: each bucket's count over its real width,
// and a last bucket shorter than half the one before counted with that one (no point).
const rates = (tl, f) => {
  const n = tl.length;
  const sliver = n >= 2 && tl[n - 1].width_s < tl[n - 2].width_s / 2;
  return tl.map((b, i) => {
    if (sliver && i === n - 1) return null;
    if (sliver && i === n - 2) return (f(b) + f(tl[n - 1])) / (b.width_s + tl[n - 1].width_s);
    return f(b) / b.width_s;
  });
};
const at = (obj, path) => path.reduce((o, k) => (o === undefined || o === null ? undefined : o[k]), obj);
let summary = "";

// Every element of class "fig" shows a figure of the report: its subject (a scenario or a
// client) by data-name, its place by data-path. Its value must be the JSON's, and its
// text must show that value as written: a count exactly, a number to its shown precision,
// a ratio in %. `required`: paths each subject must show; `maps`: maps of counts whose
// every non-zero entry must be shown.
async function checkFigures(page, subjects, required, maps) {
  const figs = await page.$$eval(".fig", (fs) => fs.map((f) => ({ name: f.dataset.name, path: JSON.parse(f.dataset.path), value: Number(f.dataset.value), unit: f.dataset.unit, text: f.textContent })));
  const precision = (v) => { const a = Math.abs(v); return a >= 100 ? 0.5 : a >= 10 ? 0.05 : a >= 1 ? 0.005 : 0.0005; };
  for (const f of figs) {
    const subject = subjects[f.name];
    const where = `${f.name} ${f.path.join(".")}`;
    if (subject === undefined) { failures.push(`figure for unknown ${where}`); continue; }
    const v = at(subject, f.path);
    if (typeof v !== "number") { failures.push(`figure ${where}: not a number in the JSON (${v})`); continue; }
    if (!close(f.value, v)) failures.push(`figure ${where}: ${f.value} != ${v}`);
    const shown = parseFloat(f.text);
    if (f.unit === "count") { if (f.text !== String(v)) failures.push(`figure ${where}: shows "${f.text}" for ${v}`); }
    else if (f.unit === "pct") { if (!(Math.abs(shown - v * 100) <= 0.05 + 1e-9) || !f.text.endsWith("%")) failures.push(`figure ${where}: shows "${f.text}" for ${v}`); }
    else if (!(Math.abs(shown - v) <= precision(v) + 1e-9)) failures.push(`figure ${where}: shows "${f.text}" for ${v}`);
  }
  const has = (name, path) => figs.some((f) => f.name === name && JSON.stringify(f.path) === JSON.stringify(path));
  for (const [name, subject] of Object.entries(subjects)) {
    for (const p of required(subject, name)) if (!has(name, p)) failures.push(`${name}: ${p.join(".")} not shown`);
    for (const m of maps) {
      for (const [k, v] of Object.entries(at(subject, m) || {})) if (v > 0 && !has(name, m.concat([k]))) failures.push(`${name}: ${m.join(".")}.${k} (${v}) not shown`);
    }
  }
  return figs.length;
}

async function checkSentences(page, selector, want, what) {
  const got = await page.$$eval(selector, (ls) => ls.map((l) => l.textContent));
  if (JSON.stringify(got) !== JSON.stringify(want)) failures.push(`${what}: ${JSON.stringify(got)} != ${JSON.stringify(want)}`);
}

// The header shows the JSON's run: its URLs, when it started, the command line (an
// argument with a space or quote in single quotes, as a shell takes it), the version,
// and the machine; every URL the report measured is among its URLs.
async function checkRun(page, measured) {
  const run = report.run;
  if (!run) { failures.push("the JSON has no run"); return; }
  const shown = Object.fromEntries(await page.$$eval("#run dd", (ds) => ds.map((d) => [d.dataset.key, d.textContent])));
  const quote = (a) => /^[A-Za-z0-9_\-.,:\/=@%+]+$/.test(a) ? a : "'" + a.replace(/'/g, "'\\''") + "'";
  const cpus = run.machine.cpus;
  const want = {
    urls: run.urls.join(" "),
    started_at: run.started_at,
    command_line: run.command_line.map(quote).join(" "),
    version: `${report.tool} ${report.version}`,
    machine: `${run.host}: ${cpus} CPU${cpus === 1 ? "" : "s"}, ${run.machine.kernel}`,
  };
  for (const [k, v] of Object.entries(want)) if (shown[k] !== v) failures.push(`header ${k}: "${shown[k]}", the JSON's "${v}"`);
  for (const u of measured) if (!run.urls.includes(u)) failures.push(`header: ${u} not among the run's URLs ${run.urls}`);
  if (!(cpus >= 1) || !run.machine.kernel || run.command_line.length < 2) failures.push(`run: ${JSON.stringify(run)}`);
}

async function checkThresholds(page, list) {
  const got = await page.$$eval("li.threshold", (ls) => ls.map((l) => ({ failed: l.dataset.failed === "true", expr: l.dataset.expr, value: Number(l.dataset.value) })));
  const want = list || [];
  if (got.length !== want.length) failures.push(`${got.length} thresholds shown for ${want.length}`);
  want.forEach((t, i) => {
    const g = got[i];
    if (!g || g.failed !== t.failed || g.expr !== t.expr || !close(g.value, t.value)) failures.push(`threshold ${t.expr}: shown ${JSON.stringify(g)}`);
  });
}

// Lines of a time chart: their values per bucket as the JSON's buckets give them.
async function checkLines(page, name, want) {
  const lines = await page.$$eval("polyline[data-values]", (ls) => ls.map((l) => ({ cls: l.getAttribute("class"), name: l.dataset.name, values: l.dataset.values.split(",").map((v) => (v === "" ? null : Number(v))) })));
  for (const [cls, values] of Object.entries(want)) {
    const l = lines.find((x) => x.name === name && x.cls === cls);
    if (!l) { failures.push(`${name}: no ${cls} line`); continue; }
    if (l.values.length !== values.length) { failures.push(`${name} ${cls}: ${l.values.length} values for ${values.length} buckets`); continue; }
    values.forEach((v, i) => {
      const got = l.values[i];
      if (v === null ? got !== null : got === null || !close(got, v)) failures.push(`${name} ${cls}[${i}]: ${got} != ${v}`);
    });
  }
}

async function checkBench(page) {
  // Expected time per request: the comparison's medians; in an open loop the mean
  // latency; else concurrency x wall / ok.
  const comparisons = [report.comparison, ...((report.rtt_sweep && report.rtt_sweep.points) || []).map((p) => p.comparison), ...((report.concurrency_sweep && report.concurrency_sweep.steps) || []).map((p) => p.comparison)].filter(Boolean);
  const rowOf = (name) => comparisons.flatMap((c) => c.rows).find((r) => r.name === name);
  const expected = report.scenarios.map((s) => {
    const row = rowOf(s.name);
    const t = row ? row.time_per_request_ms.median
      : s.load.rate !== null ? s.latency_ms.mean
      : s.concurrency * s.duration_s * 1000 / s.requests.ok;
    return { name: s.name, time: t, phases: s.phases_ms.mean_per_request };
  });
  const bars = await page.$$eval("rect.bar", (rs) => rs.map((r) => ({ name: r.dataset.name, value: Number(r.dataset.value), width: Number(r.getAttribute("width")) })));
  if (bars.length !== expected.length) failures.push(`${bars.length} bars for ${expected.length} scenarios`);
  const maxT = Math.max(...expected.map((e) => e.time));
  const maxW = Math.max(...bars.map((b) => b.width));
  for (const e of expected) {
    const b = bars.find((x) => x.name === e.name);
    if (!b) { failures.push(`no bar for ${e.name}`); continue; }
    if (!close(b.value, e.time)) failures.push(`bar ${e.name}: ${b.value} != ${e.time}`);
    // Bars are drawn to scale: width proportional to the value.
    if (Math.abs(b.width / maxW - e.time / maxT) > 0.01) failures.push(`bar ${e.name} not to scale`);
  }
  const phases = await page.$$eval("rect.phase", (rs) => rs.map((r) => ({ name: r.dataset.name, phase: r.dataset.phase, value: Number(r.dataset.value) })));
  for (const e of expected) {
    for (const p of ["dns", "connect", "tls", "h2_setup", "send", "wait", "receive"]) {
      const r = phases.find((x) => x.name === e.name && x.phase === p);
      if (!r) failures.push(`no ${p} segment for ${e.name}`);
      else if (!close(r.value, e.phases[p])) failures.push(`${e.name} ${p}: ${r.value} != ${e.phases[p]}`);
    }
  }
  // Phases on new and on reused connections: a segment for each phase the group went
  // through, with its time per request of the group (its mean times the requests that
  // went through it, over the group's requests), to one scale; none for a phase it did
  // not; a bar's segments add up to no more than the group's mean total.
  const split = await page.$$eval("rect.split", (rs) => rs.map((r) => ({ name: r.dataset.name, kind: r.dataset.kind, phase: r.dataset.phase, value: Number(r.dataset.value), width: Number(r.getAttribute("width")) })));
  const scale = split.filter((r) => r.value > 0).map((r) => r.width / r.value);
  if (scale.length && Math.max(...scale) - Math.min(...scale) > 1e-3 * Math.max(...scale)) failures.push("phase segments of new and reused connections not to one scale");
  let segments = 0;
  for (const s of report.scenarios) {
    for (const kind of ["new", "reused"]) {
      const g = s.phases_ms[kind];
      for (const p of ["blocked", "dns", "connect", "tls", "h2_setup", "quic_handshake", "send", "wait", "receive"]) {
        const r = split.find((x) => x.name === s.name && x.kind === kind && x.phase === p);
        if (g[p].count === 0) { if (r) failures.push(`${s.name} ${kind} ${p}: drawn without requests`); continue; }
        segments++;
        if (!r) failures.push(`${s.name} ${kind} ${p}: no segment`);
        else if (!close(r.value, g[p].mean * g[p].count / g.requests)) failures.push(`${s.name} ${kind} ${p}: ${r.value} != ${g[p].mean} * ${g[p].count} / ${g.requests}`);
      }
      const bar = split.filter((x) => x.name === s.name && x.kind === kind).reduce((a, x) => a + x.value, 0);
      if (g.requests > 0 && bar > g.total.mean * 1.01 + 0.01) failures.push(`${s.name} ${kind}: segments add up to ${bar} ms, over the mean request's ${g.total.mean}`);
    }
  }
  // The legend names only phases some request went through.
  const legend = await page.$$eval("#legend span", (ss) => ss.map((x) => x.textContent));
  for (const p of legend) {
    const had = report.scenarios.some((s) => ["new", "reused"].some((k) => s.phases_ms[k][p] && s.phases_ms[k][p].count > 0) || s.phases_ms.mean_per_request[p] > 0);
    if (!had) failures.push(`legend names ${p}, which no request went through`);
  }
  if (split.length !== segments) failures.push(`${split.length} segments of new/reused phases for ${segments}`);
  const lines = await page.$$eval("polyline.latency", (ls) => ls.map((l) => ({ name: l.dataset.name, points: l.getAttribute("points").trim().split(/\s+/).length })));
  for (const s of report.scenarios) {
    const l = lines.find((x) => x.name === s.name);
    if (!l) failures.push(`no latency line for ${s.name}`);
    else if (l.points !== s.latency_ms.percentiles.length) failures.push(`latency line ${s.name}: ${l.points} points, ${s.latency_ms.percentiles.length} percentiles`);
  }
  // compare --rtt A,B,...: one line per strategy through its time per request at each RTT.
  if (report.rtt_sweep) {
    const sweep = await page.$$eval("polyline.sweep", (ls) => ls.map((l) => ({ name: l.dataset.name, values: l.dataset.values.split(",").map(Number), points: l.getAttribute("points").trim().split(/\s+/).length })));
    if (sweep.length !== report.rtt_sweep.series.length) failures.push(`${sweep.length} RTT lines for ${report.rtt_sweep.series.length} strategies`);
    for (const s of report.rtt_sweep.series) {
      const l = sweep.find((x) => x.name === s.name);
      if (!l) { failures.push(`no RTT line for ${s.name}`); continue; }
      if (l.points !== report.rtt_sweep.points.length) failures.push(`RTT line ${s.name}: ${l.points} points`);
      s.time_per_request_ms.forEach((v, i) => { if (!close(l.values[i], v)) failures.push(`RTT line ${s.name} point ${i}: ${l.values[i]} != ${v}`); });
    }
  }
  // compare -c 1,10,50,...: per strategy a line through its requests/s and its p50 and
  // p99 at each step, the knee circled where the JSON has it, a table row per step.
  if (report.concurrency_sweep) {
    const ks = report.concurrency_sweep.series;
    for (const [cls, of] of [["knee-rps", (p) => p.requests_per_s.median], ["knee-p50", (p) => p.latency_p50_ms.median], ["knee-p99", (p) => p.latency_p99_ms.median]]) {
      const drawn = await page.$$eval("polyline." + cls, (ls) => ls.map((l) => ({ name: l.dataset.name, values: l.dataset.values.split(",").map(Number) })));
      if (drawn.length !== ks.length) failures.push(`${drawn.length} ${cls} lines for ${ks.length} strategies`);
      for (const s of ks) {
        const l = drawn.find((x) => x.name === s.name);
        if (!l) { failures.push(`no ${cls} line for ${s.name}`); continue; }
        s.points.forEach((p, i) => { if (!close(l.values[i], of(p))) failures.push(`${cls} ${s.name} c=${p.concurrency}: ${l.values[i]} != ${of(p)}`); });
      }
    }
    const knees = await page.$$eval("circle.knee", (cs) => cs.map((c) => ({ name: c.dataset.name, c: Number(c.dataset.concurrency) })));
    for (const s of ks) {
      const k = knees.filter((x) => x.name === s.name);
      if (s.knee === null ? k.length !== 0 : k.length !== 1 || k[0].c !== s.knee) failures.push(`${s.name}: knee drawn at ${JSON.stringify(k)}, JSON ${s.knee}`);
    }
    const trs = await page.$$eval("tr.knee-row", (rs) => rs.length);
    const want = ks.reduce((n, s) => n + s.points.length, 0);
    if (trs !== want) failures.push(`${trs} knee table rows for ${want} steps`);
    const verdictTexts = await page.$$eval("#verdict li", (ls) => ls.map((l) => l.textContent));
    for (const s of ks) if (!verdictTexts.some((t) => t.includes(s.verdict.text))) failures.push(`${s.name}: verdict not shown: ${s.verdict.text}`);
  }
  // compare: each row's times slower, its interval and its verdict.
  const est = await page.$$eval("circle.ci-estimate", (cs) => cs.map((c) => ({ name: c.dataset.name, value: Number(c.dataset.value) })));
  const cis = await page.$$eval("line.ci", (ls) => ls.map((l) => ({ name: l.dataset.name, lo: Number(l.dataset.lo), hi: Number(l.dataset.hi) })));
  const verdicts = await page.$$eval("td.ci-verdict", (ts) => ts.map((t) => ({ name: t.dataset.name, text: t.textContent })));
  let rows = 0;
  for (const s of report.scenarios) {
    const r = rowOf(s.name);
    if (!r) continue;
    rows++;
    const e = est.find((x) => x.name === s.name);
    if (!e || !close(e.value, r.times_slower)) failures.push(`${s.name}: times slower shown ${e && e.value}, JSON ${r.times_slower}`);
    const c = cis.find((x) => x.name === s.name);
    if (r.times_slower_ci) { if (!c || !close(c.lo, r.times_slower_ci[0]) || !close(c.hi, r.times_slower_ci[1])) failures.push(`${s.name}: interval shown ${JSON.stringify(c)}, JSON ${r.times_slower_ci}`); }
    else if (c) failures.push(`${s.name}: an interval drawn where the JSON has none`);
    const v = verdicts.find((x) => x.name === s.name);
    // The same words as the text and the JSON: a failed row is failed, a row without an
    // interval is not judged, "slower" only where the interval says so.
    const want = r.failed_rounds > 0 ? /^failed: no request succeeded/
      : r.no_success ? /^not ranked: every response an error$/
      : r.best ? /^best$/
      : !r.times_slower_ci ? new RegExp("^not enough rounds to judge \\(" + r.rounds_ms.length + " of 6\\)$")
      : r.significant ? (r.times_slower >= 1 ? /^slower$/ : /^faster$/) : /^no difference/;
    if (!v || !want.test(v.text)) failures.push(`${s.name}: verdict "${v && v.text}" (best ${r.best}, significant ${r.significant})`);
  }
  if (est.length !== rows) failures.push(`${est.length} rows against the best for ${rows}`);
  // Timelines: per scenario with 2 buckets or more, requests/s and new connections/s
  // from the buckets, a marker on each bucket with errors, p50 and p99.
  const markers = await page.$$eval("path.error-marker", (ms) => ms.map((m) => ({ name: m.dataset.name, t: Number(m.dataset.t), errors: Number(m.dataset.errors) })));
  const drawn = await page.$$eval("svg.timeline-rates", (ss) => ss.map((s) => s.dataset.name));
  for (const s of report.scenarios) {
    const tl = s.timeline;
    if (tl.length < 2) {
      if (drawn.includes(s.name)) failures.push(`${s.name}: timeline drawn for ${tl.length} bucket`);
      continue;
    }
    await checkLines(page, s.name, {
      "rate-requests": rates(tl, (b) => b.requests),
      "rate-new": rates(tl, (b) => b.new_connections),
      "lat-p50": tl.map((b) => b.p50_ms),
      "lat-p99": tl.map((b) => b.p99_ms),
    });
    // The windows in which a hop could not be reached, shaded where the JSON has them.
    const shaded = await page.$$eval("rect.outage", (rs) => rs.map((r) => ({ name: r.dataset.name, start: Number(r.dataset.start), end: Number(r.dataset.end) })));
    const windows = (s.outages && s.outages.windows) || [];
    const mine = shaded.filter((r) => r.name === s.name);
    if (mine.length !== windows.length) failures.push(`${s.name}: ${mine.length} outage windows shaded for ${windows.length}`);
    windows.forEach((w) => { if (!mine.some((r) => close(r.start, w.start_s) && (w.end_s === undefined || close(r.end, w.end_s)))) failures.push(`${s.name}: no window shaded from ${w.start_s} s`); });
    const withErrors = tl.filter((b) => b.errors > 0);
    const mk = markers.filter((m) => m.name === s.name);
    if (mk.length !== withErrors.length) failures.push(`${s.name}: ${mk.length} error markers for ${withErrors.length} buckets with errors`);
    withErrors.forEach((b) => { if (!mk.some((m) => close(m.t, b.t_s) && m.errors === b.errors)) failures.push(`${s.name}: no marker for ${b.errors} errors at ${b.t_s} s`); });
  }
  // Each outage and restart said, with its hop and its figures.
  const said = await page.$$eval("li.outage", (ls) => ls.map((l) => ({ name: l.dataset.name, text: l.textContent })));
  for (const s of report.scenarios) {
    const o = s.outages || { windows: [], restarts: [] };
    const lines = said.filter((l) => l.name === s.name).map((l) => l.text);
    for (const w of o.windows.slice(0, 5)) if (!lines.some((t) => t.includes(`Could not reach ${w.hop} for ${w.duration_s.toFixed(2)} s, from ${w.start_s.toFixed(2)} s`))) failures.push(`${s.name}: no sentence for the window from ${w.start_s} s`);
    for (const r of o.restarts) if (!lines.some((t) => t.includes(`restart of ${r.hop} at ${r.at_s.toFixed(2)} s`) || t.includes(`stop of ${r.hop} at ${r.at_s.toFixed(2)} s`))) failures.push(`${s.name}: no sentence for the restart at ${r.at_s} s`);
    if (!o.windows.length && !o.restarts.length && lines.length) failures.push(`${s.name}: outage sentences without an outage`);
  }
  // The connections block, requests and errors, the phase tables: every figure as the
  // JSON has it (a scenario's comparison row under "comparison", as --fail-if reads it).
  const subjects = {};
  for (const s of report.scenarios) subjects[s.name] = Object.assign({}, s, rowOf(s.name) ? { comparison: rowOf(s.name) } : {});
  // merge: a row per agent.
  (report.agents || []).forEach((a, i) => { subjects["agent " + i] = a; });
  const agentRows = await page.$$eval("tr.agent", (t) => t.length);
  if (agentRows !== (report.agents || []).length) failures.push(`${agentRows} agent rows for ${(report.agents || []).length} agents`);
  const figures = await checkFigures(page, subjects, (s, name) => {
    if (name.startsWith("agent ")) return [["requests"], ["ok"], ["errors"], ["connections"], ["p99_ms"], ["wall_s"], ["client_cpu_us_per_request"]];
    const p = [["connections", "opened"], ["connections", "reused_requests"], ["connections", "reuse_ratio"],
      ["connections", "requests_per_connection", "min"], ["connections", "requests_per_connection", "mean"], ["connections", "requests_per_connection", "max"],
      ["connections", "tls_handshakes", "full"], ["connections", "tls_handshakes", "resumed"],
      ["requests", "attempted"], ["requests", "ok"], ["requests", "error_status"], ["requests", "aborted_at_deadline"], ["requests", "late_sends"], ["requests", "retries", "stale_connection"],
      ["phases_ms", "new", "total", "count"], ["phases_ms", "reused", "total", "count"]];
    for (const kind of ["new", "reused"]) if (s.phases_ms[kind].total.count > 0) for (const q of ["mean", "p50", "p99", "max"]) p.push(["phases_ms", kind, "total", q]);
    if (s.phases_ms.new.connect.count > 0) p.push(["phases_ms", "new", "connect", "mean"]);
    if (s.connections.early_data.attempted > 0) p.push(["connections", "early_data", "accepted"], ["connections", "early_data", "rejected"]);
    if (s.comparison) p.push(["comparison", "time_per_request_ms", "median"], ["comparison", "times_slower"], ["comparison", "extra_ms_per_request"]);
    return p;
  }, [["connections", "close_reasons"], ["requests", "errors"], ["requests", "error_details"], ["requests", "status_codes"]]);
  await checkSentences(page, "li.verdict", ((report.concurrency_sweep && report.concurrency_sweep.series) || []).map((k) => k.verdict.text).concat(comparisons.flatMap((c) => c.explanations.map((f) => f.text))), "verdict");
  await checkRun(page, report.scenarios.map((s) => s.url));
  // The headline: compare's sentences; bench's, one per scenario that measured something,
  // opening with its requests and connections.
  const cut = report.interrupted ? [report.interrupted.text] : [];
  if (comparisons.length) await checkSentences(page, "li.headline", cut.concat(comparisons.flatMap((c) => c.headline.map((f) => f.text).concat((c.left_out || []).map((f) => f.text)))), "headline");
  else {
    // Each the JSON's headline, as a value of the report (text, code and evidence).
    await checkSentences(page, "li.headline", cut.concat(report.scenarios.filter((s) => s.headline).map((s) => s.headline.text)), "headline");
  }
  // The diagnosis: the JSON's findings, the same entries in the same order, by text and code.
  for (const s of report.scenarios) {
    await checkSentences(page, `li.diagnosis[data-name="${s.name}"]`, s.diagnosis.map((d) => d.text), `${s.name} diagnosis`);
    const codes = await page.$$eval(`li.diagnosis[data-name="${s.name}"]`, (ls) => ls.map((l) => l.dataset.code));
    if (JSON.stringify(codes) !== JSON.stringify(s.diagnosis.map((d) => d.code))) failures.push(`${s.name} diagnosis codes: ${JSON.stringify(codes)}`);
  }
  await checkThresholds(page, report.thresholds);
  const tableRows = await page.$$eval("#numbers tbody tr", (t) => t.length);
  if (tableRows !== report.scenarios.length) failures.push(`${tableRows} table rows`);
  summary = `${report.scenarios.length} scenarios, ${figures} figures, ${segments} new/reused phase segments, ${rows} rows against the best`;
}

async function checkAudit(page) {
  const title = await page.textContent("#title");
  if (!title.includes(report.url)) failures.push(`title "${title}" without ${report.url}`);
  if (report.command) {
    const cmd = await page.textContent("#command");
    if (!cmd.includes(report.command.join(" ")) || !cmd.includes(`exit status ${report.exit_status}`)) failures.push(`command line "${cmd}"`);
  }
  await checkSentences(page, "li.verdict", report.verdict.map((f) => f.text), "verdict");
  const verdictCodes = await page.$$eval("li.verdict", (ls) => ls.map((l) => l.dataset.code));
  if (JSON.stringify(verdictCodes) !== JSON.stringify(report.verdict.map((f) => f.code))) failures.push(`verdict codes: ${JSON.stringify(verdictCodes)}`);
  await checkSentences(page, "li.headline", (report.interrupted ? [report.interrupted.text] : []).concat([report.headline.text]), "headline");
  await checkRun(page, [report.url]);
  await checkThresholds(page, report.thresholds);
  const clients = [report.total].concat(report.clients.length > 1 ? report.clients : []);
  const subjects = { report };
  for (const c of clients) subjects[c.client] = c;
  const figures = await checkFigures(page, subjects, (c) => c === report ? [["peak_concurrent_connections"]] : [
    ["connections"], ["requests"], ["responses"], ["reuse_ratio"], ["unused_connections"],
    ["requests_per_connection", "min"], ["requests_per_connection", "mean"], ["requests_per_connection", "max"],
    ["tls_handshakes", "full"], ["tls_handshakes", "resumed"], ["cut_responses", "count"],
  ], [["endings"], ["http_versions"], ["connection_headers"], ["status_codes"]]);
  const bars = await page.$$eval("rect.count-bar", (rs) => rs.map((r) => ({ name: r.dataset.name, key: r.dataset.key, value: Number(r.dataset.value), width: Number(r.getAttribute("width")) })));
  const maxN = Math.max(...clients.flatMap((c) => [c.connections, c.requests]));
  const maxW = Math.max(...bars.map((b) => b.width));
  for (const c of clients) for (const k of ["connections", "requests"]) {
    const b = bars.find((x) => x.name === c.client && x.key === k);
    if (!b || b.value !== c[k]) failures.push(`${c.client} ${k}: bar ${b && b.value} for ${c[k]}`);
    else if (c[k] > 0 && Math.abs(b.width / maxW - c[k] / maxN) > 0.01) failures.push(`${c.client} ${k}: bar not to scale`);
  }
  const tl = report.timeline;
  const drawn = await page.$$eval("svg.timeline-rates", (ss) => ss.length);
  if (tl.length >= 2) {
    const ps = (f) => rates(tl, f);
    await checkLines(page, "all", {
      "rate-new": ps((b) => b.new_connections),
      "rate-closed": ps((b) => b.closed_connections),
      "rate-requests": ps((b) => b.requests),
      ...(tl.some((b) => b.tls_full + b.tls_resumed > 0) ? { "rate-tls-full": ps((b) => b.tls_full), "rate-tls-resumed": ps((b) => b.tls_resumed) } : {}),
    });
  } else if (drawn) failures.push(`timeline drawn for ${tl.length} bucket`);
  summary = `audit of ${clients.length} client group(s), ${figures} figures, ${tl.length} timeline buckets`;
}

try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("request", (r) => { if (!r.url().startsWith("file:")) problems.push(`network fetch: ${r.url()}`); });
  await page.goto(pathToFileURL(html).href);
  await page.waitForSelector("body[data-drawn=true]", { timeout: 10000 });
  if (report.total) await checkAudit(page);
  else await checkBench(page);
  if (shot) await page.screenshot({ path: shot, fullPage: true });
} finally {
  await browser.close();
}
for (const p of problems) failures.push(p);
if (failures.length) {
  console.error("HTML report check failed:\n  " + failures.join("\n  "));
  process.exit(1);
}
console.log(`HTML report ok: ${summary}, no errors`);
