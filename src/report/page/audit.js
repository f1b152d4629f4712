  const r = data.report;
  const about = document.getElementById("about");
  if (r.command) h("li", { id: "command" }, about, "Command: " + r.command.join(" ") + " (exit status " + (r.exit_status === null ? "-" : r.exit_status) + ")");
  const peak = h("li", {}, about, "Peak concurrent connections: ");
  fig(peak, "b", "report", ["peak_concurrent_connections"], r.peak_concurrent_connections);
  for (const f of r.verdict) {
    const li = h("li", { class: "verdict" }, document.getElementById("verdict"), f.text);
    li.setAttribute("data-code", f.code);
  }
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
    add("status codes", cell => kvs(cell, n, ["status_codes"], c.status_codes));
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
