  // The phases come with the data (src/record/phase.rs); each gets the palette's next color.
  const PHASES = data.phases;
  const PALETTE = ["#bbb", "#8e6bbf", "#e07b39", "#a0522d", "#8b4513", "#d64545", "#b8860b", "#c0392b", "#6aa84f", "#3d85c6", "#45b5aa"];
  const COLORS = Object.fromEntries(PHASES.map((p, i) => [p, PALETTE[i % PALETTE.length]]));
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
      text(svg, label + width + 10, y + 4, r.failed_rounds > 0 ? "failed" : r.no_success || r.feature_missing ? "not ranked" : r.best ? "best" : r.times_slower.toFixed(2) + "x" + ci);
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
          : r.no_success ? "not ranked: every response an error"
          : r.feature_missing ? "not ranked: " + r.feature_missing
          : r.best ? "best"
          : !r.times_slower_ci ? "not enough rounds to judge (" + r.rounds_ms.length + " of 6)"
          : r.repeat_of && !r.significant ? "no difference from " + r.repeat_of + " (the same strategy again)"
          : r.significant ? (r.times_slower >= 1 ? "slower" : "faster") : "no difference (within the noise)";
        h("td", { class: "ci-verdict", "data-name": e.name }, tr, verdict);
      }
    }
  }

  // Stacked phases of a mean request. The legend names only the phases this run had
  // (a chart is a claim too: a colour for a phase no request went through says it did).
  const had = p => entries.some(e => e.phases.some(([q, v]) => q === p && v > 0)
    || e.phases_new[p].count > 0 || e.phases_reused[p].count > 0);
  const legend = document.getElementById("legend");
  for (const [p, c] of Object.entries(COLORS)) {
    if (p === "blocked" || !had(p)) continue;
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
  // table per scenario with both side by side. Each bar is one population (the requests
  // on new, or on reused, connections): a segment is its phase's time per request of
  // that population (the phase's mean times the requests that went through it, over
  // the population), so the segments add up to the population's mean request, not a
  // sum of means over different requests (one DNS lookup in 300 is a sliver).
  const split = document.getElementById("split");
  const kinds = [["new", "phases_new"], ["reused", "phases_reused"]];
  const share = (g, p) => g.requests > 0 ? g[p].mean * g[p].count / g.requests : 0;
  const sumOf = g => PHASES.reduce((a, p) => a + (g[p].count > 0 ? share(g, p) : 0), 0);
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
        const v = share(g, p), w = v / maxSplit * width;
        const r = el("rect", { class: "split", x: x, y: y + 2, width: w, height: row - 10, fill: COLORS[p], "data-name": e.name, "data-kind": kind, "data-phase": p, "data-value": v }, split);
        el("title", {}, r).textContent = kind + " " + p + ": " + fmt(v) + " ms per request (" + fmt(g[p].mean) + " ms mean over the " + g[p].count + " of " + g.requests + " that went through it)";
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
  const errs = table(document.getElementById("errors"), "errors-table", ["strategy", "attempted", "ok", "error status", "errors by category", "error details", "status codes", "aborted at the deadline", "late sends"]);
  for (const e of entries) {
    const r = e.requests, tr = h("tr", { "data-name": e.name }, errs);
    h("td", {}, tr, e.name);
    fig(h("td", {}, tr), "span", e.name, ["requests", "attempted"], r.attempted);
    fig(h("td", {}, tr), "span", e.name, ["requests", "ok"], r.ok);
    fig(h("td", {}, tr), "span", e.name, ["requests", "error_status"], r.error_status);
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

  // compare -c 1,10,50,...: requests/s and latency against concurrency, one line per
  // strategy; the steps evenly spaced (they usually grow by factors).
  if (data.knee) {
    document.getElementById("knee-section").hidden = false;
    const steps = data.knee.series[0].points.map(p => p.concurrency);
    const xK = j => left + (steps.length > 1 ? j / (steps.length - 1) : 0.5) * W;
    const axes = (svg, maxY, unit) => {
      svg.setAttribute("width", left + W + 200);
      svg.setAttribute("height", H + 50);
      el("line", { x1: left, y1: top + H, x2: left + W, y2: top + H, stroke: "#999" }, svg);
      el("line", { x1: left, y1: top, x2: left, y2: top + H, stroke: "#999" }, svg);
      steps.forEach((c, j) => text(svg, xK(j), top + H + 16, "c=" + c, "middle"));
      for (let k = 0; k <= 4; k++) text(svg, left - 6, top + H - k / 4 * H + 4, fmt(maxY * k / 4) + unit, "end");
    };
    const line = (svg, cls, s, values, maxY, color, dash) => {
      const pts = values.map((v, j) => xK(j).toFixed(1) + "," + (top + H - v / maxY * H).toFixed(1)).join(" ");
      const attrs = { class: cls, points: pts, fill: "none", stroke: color, "stroke-width": 2, "data-name": s.name, "data-values": values.join(",") };
      if (dash) attrs["stroke-dasharray"] = "6,4";
      el("polyline", attrs, svg);
    };
    const rps = document.getElementById("knee-rps");
    const maxR = Math.max(...data.knee.series.flatMap(s => s.points.map(p => p.requests_per_s.median)), 1e-9);
    axes(rps, maxR, "");
    const lat = document.getElementById("knee-latency");
    const maxL = Math.max(...data.knee.series.flatMap(s => s.points.map(p => p.latency_p99_ms.median)), 1e-9);
    axes(lat, maxL, "");
    const tbody = document.querySelector("#knee-table tbody");
    data.knee.series.forEach((s, i) => {
      const color = LINE_COLORS[i % LINE_COLORS.length];
      const values = s.points.map(p => p.requests_per_s.median);
      line(rps, "knee-rps", s, values, maxR, color, false);
      s.points.forEach((p, j) => {
        const knee = s.knee === p.concurrency;
        el("circle", { class: knee ? "knee" : "", cx: xK(j).toFixed(1), cy: (top + H - values[j] / maxR * H).toFixed(1), r: knee ? 6 : 3, fill: color, "data-name": s.name, "data-concurrency": p.concurrency }, rps);
      });
      line(lat, "knee-p50", s, s.points.map(p => p.latency_p50_ms.median), maxL, color, false);
      line(lat, "knee-p99", s, s.points.map(p => p.latency_p99_ms.median), maxL, color, true);
      for (const svg of [rps, lat]) {
        el("rect", { x: left + W + 14, y: top + i * 18, width: 12, height: 12, fill: color }, svg);
        text(svg, left + W + 32, top + i * 18 + 11, s.name);
      }
      const pct = x => x == null ? "-" : Math.round(x.median * 100) + " %";
      for (const p of s.points) {
        const g = p.growth ? p.growth.ratio.toFixed(2) + "x " + (p.growth.grew ? "grew" : p.growth.fell ? "fell" : "same") : "";
        const tr = h("tr", { class: "knee-row", "data-name": s.name, "data-concurrency": p.concurrency }, tbody);
        for (const cell of [s.name, (s.knee === p.concurrency ? "knee: " : "") + p.concurrency, Math.round(p.requests_per_s.median), fmt(p.latency_p50_ms.median), fmt(p.latency_p99_ms.median), pct(p.client_cores), pct(p.server_cores), pct(p.machine_busy), g]) h("td", {}, tr, cell);
      }
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
    ], "", true, e.outages);
    timeChart(box, "timeline-latency", e.name, tl, [
      { cls: "lat-p50", label: "p50", color: "#6aa84f", values: tl.map(b => b.p50_ms) },
      { cls: "lat-p99", label: "p99", color: "#d64545", values: tl.map(b => b.p99_ms) },
    ], " ms", false);
  });

  // Each scenario's outages and restarts, in the text report's words.
  const withOutages = entries.filter(e => e.outage_lines.length);
  if (withOutages.length) document.getElementById("diagnosis-section").hidden = false;
  for (const e of withOutages) {
    const box = document.getElementById("diagnosis");
    if (entries.length > 1) h("h3", {}, box, e.name);
    const ul = h("ul", { class: "sentences" }, box);
    for (const line of e.outage_lines) h("li", { class: "outage", "data-name": e.name }, ul, line);
  }

  // Each scenario's diagnosis.
  const withDiagnosis = entries.filter(e => e.diagnosis.length);
  if (withDiagnosis.length) document.getElementById("diagnosis-section").hidden = false;
  for (const e of withDiagnosis) {
    const box = document.getElementById("diagnosis");
    if (entries.length > 1) h("h3", {}, box, e.name);
    const ul = h("ul", { class: "sentences" }, box);
    for (const d of e.diagnosis) {
      const li = h("li", { class: "diagnosis" }, ul, d.text);
      li.setAttribute("data-name", e.name);
      li.setAttribute("data-code", d.code);
    }
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
