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
  function timeChart(box, cls, name, tl, series, unit, markers, outages) {
    const end = Math.max(...tl.map(b => b.t_s + b.width_s), 1e-9);
    const xT = t => left + t / end * W;
    // The windows in which a hop could not be reached, shaded under the lines.
    const shade = svg => (outages || []).forEach(o => {
      const to = o.end_s === undefined ? end : o.end_s;
      const r = el("rect", { class: "outage", x: xT(o.start_s).toFixed(1), y: top, width: Math.max(xT(to) - xT(o.start_s), 1).toFixed(1), height: H / 2, fill: "#f4cccc", "data-name": name, "data-start": o.start_s, "data-end": to }, svg);
      el("title", {}, r).textContent = "could not reach " + o.hop + " from " + fmt(o.start_s) + " s to " + fmt(to) + " s";
    });
    const mid = b => b.t_s + b.width_s / 2;
    const svg = el("svg", { class: cls, "data-name": name, width: left + W + 200, height: H / 2 + 50 }, box);
    shade(svg);
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
  // The header: what was measured, when, how, with which version, on which machine.
  // An argument with a space or a quote in it is shown in single quotes, as a shell
  // takes it.
  const quote = a => /^[A-Za-z0-9_\-.,:\/=@%+]+$/.test(a) ? a : "'" + a.replace(/'/g, "'\\''") + "'";
  if (data.run) {
    const dl = document.getElementById("run");
    dl.hidden = false;
    const m = data.run.machine;
    for (const [key, label, value] of [
      ["urls", "URL", data.run.urls.join(" ")],
      ["started_at", "started", data.run.started_at],
      ["command_line", "command", data.run.command_line.map(quote).join(" ")],
      ["version", "version", data.generated_by],
      ["machine", "machine", data.run.host + ": " + m.cpus + " CPU" + (m.cpus === 1 ? "" : "s") + ", " + m.kernel],
    ]) {
      h("dt", {}, dl, label);
      h("dd", { "data-key": key }, dl, value);
    }
  }
  sentences(document.getElementById("headline"), data.headline || [], "headline");
  /*{{PAGE}}*/
  document.getElementById("footer").textContent = "Generated by " + data.generated_by;
  document.body.setAttribute("data-drawn", "true");
})();
