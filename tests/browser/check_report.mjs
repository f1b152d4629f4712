// Opens a handshake HTML report in headless Chromium (Debian's /usr/bin/chromium) and
// checks that the charts are drawn with the JSON report's numbers and that the page
// logs no error. Usage: node check_report.mjs REPORT.html REPORT.json [SCREENSHOT.png]
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
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("request", (r) => { if (!r.url().startsWith("file:")) problems.push(`network fetch: ${r.url()}`); });
  await page.goto(pathToFileURL(html).href);
  await page.waitForSelector("body[data-drawn=true]", { timeout: 10000 });

  const close = (a, b) => Math.abs(a - b) <= 1e-9 + 1e-6 * Math.abs(b);
  // Expected time per request: the comparison's medians, else concurrency x wall / ok.
  const comparisons = [report.comparison, ...((report.rtt_sweep && report.rtt_sweep.points) || []).map((p) => p.comparison)].filter(Boolean);
  const expected = report.scenarios.map((s) => {
    const row = comparisons.flatMap((c) => c.rows).find((r) => r.name === s.name);
    const t = row ? row.time_per_request_ms.median : s.concurrency * s.duration_s * 1000 / s.requests.ok;
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
  // Timelines: per scenario with 2 buckets or more, requests/s and new connections/s
  // from the buckets, a marker on each bucket with errors, p50 and p99.
  const tlines = await page.$$eval("polyline.rate-requests, polyline.rate-new, polyline.lat-p50, polyline.lat-p99", (ls) => ls.map((l) => ({ cls: l.getAttribute("class"), name: l.dataset.name, values: l.dataset.values.split(",").map((v) => (v === "" ? null : Number(v))) })));
  const markers = await page.$$eval("path.error-marker", (ms) => ms.map((m) => ({ name: m.dataset.name, t: Number(m.dataset.t), errors: Number(m.dataset.errors) })));
  for (const s of report.scenarios) {
    const tl = s.timeline;
    const mine = tlines.filter((l) => l.name === s.name);
    if (tl.length < 2) {
      if (mine.length) failures.push(`${s.name}: timeline drawn for ${tl.length} bucket`);
      continue;
    }
    const want = {
      "rate-requests": tl.map((b) => b.requests / b.width_s),
      "rate-new": tl.map((b) => b.new_connections / b.width_s),
      "lat-p50": tl.map((b) => b.p50_ms),
      "lat-p99": tl.map((b) => b.p99_ms),
    };
    for (const [cls, values] of Object.entries(want)) {
      const l = mine.find((x) => x.cls === cls);
      if (!l) { failures.push(`${s.name}: no ${cls} line`); continue; }
      if (l.values.length !== values.length) { failures.push(`${s.name} ${cls}: ${l.values.length} values for ${values.length} buckets`); continue; }
      values.forEach((v, i) => {
        const got = l.values[i];
        if (v === null ? got !== null : got === null || !close(got, v)) failures.push(`${s.name} ${cls}[${i}]: ${got} != ${v}`);
      });
    }
    const withErrors = tl.filter((b) => b.errors > 0);
    const mk = markers.filter((m) => m.name === s.name);
    if (mk.length !== withErrors.length) failures.push(`${s.name}: ${mk.length} error markers for ${withErrors.length} buckets with errors`);
    withErrors.forEach((b) => { if (!mk.some((m) => close(m.t, b.t_s) && m.errors === b.errors)) failures.push(`${s.name}: no marker for ${b.errors} errors at ${b.t_s} s`); });
  }
  const rows = await page.$$eval("#numbers tbody tr", (t) => t.length);
  if (rows !== report.scenarios.length) failures.push(`${rows} table rows`);
  if (shot) await page.screenshot({ path: shot, fullPage: true });
} finally {
  await browser.close();
}
for (const p of problems) failures.push(p);
if (failures.length) {
  console.error("HTML report check failed:\n  " + failures.join("\n  "));
  process.exit(1);
}
console.log(`HTML report ok: ${report.scenarios.length} scenarios drawn, no errors`);
