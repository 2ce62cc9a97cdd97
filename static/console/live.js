// Live telemetry charts: they open with the recent past (per-minute rollups, then the
// collector's buffer of recent points, both in the page), then extend from websocket points
// without a gap; SLA lines, stale nodes, a reconnecting socket with a visible "stale" badge,
// history ranges, and a sentence instead of an empty chart (never an empty 2000 axis).
(function () {
  "use strict";
  // A marker is an SVG element per point: drawn only while they stand apart (8 px or more
  // each on average); a chart of 20 series of a day would otherwise hold thousands.
  var MARKER_PX = 8;
  var MAX_POINTS = 2000;  // per trace: the server's budget per series (telemetry/resolution.py)
  var cfg = JSON.parse(document.getElementById("live-config").textContent);
  var charts = {};
  var received = 0;
  var mode = "live";
  var lastMessageAt = 0;
  var nodeState = {};
  var NODE_CHARTS = ["chart-cpu", "chart-gpu", "chart-mem"];

  var SPECS = {
    "chart-rate": { title: "requests/s", sla: "min_throughput_rps", field: "request_rate" },
    "chart-success": { title: "success %", sla: "min_success_rate", field: "success_rate" },
    "chart-latency": { title: "latency ms (avg ── p99 ┄)", sla: "p99_latency_ms" },
    "chart-queue": { title: "queue ms", sla: "max_queue_ms", field: "queue_ms" },
    "chart-tokens": { title: "output tokens/s", field: "tokens_per_s" },
    "chart-cpu": { title: "node CPU %" },
    "chart-gpu": { title: "GPU utilization %" },
    "chart-mem": { title: "node memory GiB used" }
  };

  function slaShapes(spec) {
    var shapes = [], notes = [];
    if (!spec.sla) return { shapes: shapes, annotations: notes };
    Object.keys(cfg.sla || {}).forEach(function (model) {
      var v = (cfg.sla[model] || {})[spec.sla];
      if (v === null || v === undefined) return;
      shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, y0: v, y1: v,
                    line: { color: "#dc3545", width: 1.5, dash: "dot" } });
      notes.push({ xref: "paper", x: 1, y: v, xanchor: "right", yanchor: "bottom",
                   text: "SLA " + model, showarrow: false, font: { size: 10, color: "#dc3545" } });
    });
    return { shapes: shapes, annotations: notes };
  }

  function windowRange(spanS) {
    var now = Date.now();
    return [new Date(now - spanS * 1000), new Date(now)];
  }

  function emptyNote(id) {
    return document.querySelector('[data-empty-for="' + id + '"]');
  }

  function reasonFor(id) {
    if (mode !== "live" && id === "chart-mem") return "Node memory is not kept in rollups: it comes with live points only.";
    if (id === "chart-tokens") return "No output tokens counted: the model exports no vllm:generation_tokens_total counter, or nothing streamed in this range.";
    if (mode !== "live") return "No rollups in this range yet: the collector writes one row per minute.";
    if (NODE_CHARTS.indexOf(id) < 0) return cfg.empty.traffic;
    var seen = Object.keys(nodeState).length || (cfg.initial || { nodes: [] }).nodes.length;
    if (seen && id === "chart-gpu") return "No GPU: this cluster's nodes report none.";
    if (seen && id === "chart-mem") return "Node memory comes with live points only: waiting for the next scrape.";
    return cfg.empty.nodes || "Waiting for the first node point.";
  }

  function showEmpty(id) {
    var c = charts[id], note = emptyNote(id);
    if (!c || !note) return;
    var empty = c.count === 0;
    note.textContent = empty ? reasonFor(id) : "";
    note.classList.toggle("d-none", !empty);
    c.el.classList.toggle("invisible", empty);
  }

  // Each chart keeps its traces as arrays and is drawn by one Plotly.react: on opening,
  // and again only when a series appears; live points are appended in batches, one
  // extendTraces per chart per animation frame, every trace bounded to MAX_POINTS.
  function layoutFor(id, spanS) {
    var spec = SPECS[id], sla = slaShapes(spec);
    return {
      title: { text: spec.title, font: { size: 13 } }, margin: { l: 45, r: 10, t: 30, b: 30 },
      xaxis: { type: "date", range: windowRange(spanS) }, yaxis: { rangemode: "tozero" },
      showlegend: true, legend: { orientation: "h", y: -0.2, font: { size: 10 } },
      shapes: sla.shapes, annotations: sla.annotations
    };
  }

  function initChart(id, spanS) {
    var el = document.getElementById(id);
    if (!el) return;
    charts[id] = { el: el, spanS: spanS, traces: [], index: {}, last: {}, count: 0,
                   pending: {}, fresh: false, drawn: false };
    el.dataset.points = 0;
  }

  function add(id, key, t, y, style) {
    var c = charts[id];
    if (!c || y === null || y === undefined) return;
    if (c.last[key] !== undefined && t <= c.last[key]) return; // already drawn (history overlap)
    c.last[key] = t;
    var i = c.index[key];
    if (i === undefined) {
      i = c.index[key] = c.traces.length;
      c.traces.push(Object.assign({ x: [], y: [], name: key, mode: "lines+markers",
                                    marker: { size: 3 } }, style || {}));
      c.fresh = true;  // a new trace: the next draw is a react
    }
    var tr = c.traces[i];
    tr.x.push(t); tr.y.push(y);
    if (tr.x.length > MAX_POINTS) { tr.x.splice(0, tr.x.length - MAX_POINTS); tr.y.splice(0, tr.y.length - MAX_POINTS); }
    if (c.drawn && !c.fresh) {
      var p = c.pending[i] || (c.pending[i] = { x: [], y: [] });
      p.x.push(t); p.y.push(y);
      if (p.x.length > MAX_POINTS) { p.x.shift(); p.y.shift(); }  // a hidden tab runs no frames
    }
    c.count += 1;
  }

  // Whole series at once (history answered as arrays), without a call per point.
  function addSeries(id, key, xs, ys, style) {
    var c = charts[id];
    if (!c) return;
    var x = [], y = [];
    for (var k = 0; k < xs.length; k++) {
      if (ys[k] !== null && ys[k] !== undefined) { x.push(xs[k]); y.push(ys[k]); }
    }
    if (!x.length) return;
    c.index[key] = c.traces.length;
    c.last[key] = x[x.length - 1];
    c.traces.push(Object.assign({ x: x.slice(-MAX_POINTS), y: y.slice(-MAX_POINTS), name: key,
                                  mode: "lines+markers", marker: { size: 3 } }, style || {}));
    c.count += x.length;
    c.fresh = true;
  }

  function mark(name) {
    if (window.performance && performance.mark) performance.mark(name);
  }

  // Plotly.react's promise settles once the chart is on screen: the marks follow it.
  function render(id) {
    var c = charts[id];
    var data = c.traces.map(function (tr) {
      var sparse = tr.x.length * MARKER_PX <= (c.el.clientWidth || 600);
      var mode = tr.mode === "lines+markers" && !sparse ? "lines" : tr.mode;
      return Object.assign({}, tr, { x: tr.x.slice(), y: tr.y.slice(), mode: mode });
    });
    var done = Plotly.react(c.el, data, layoutFor(id, c.spanS), { displayModeBar: false, responsive: true });
    c.fresh = false; c.pending = {};
    var first = !c.drawn;
    c.drawn = true;
    c.el.dataset.points = c.count;
    showEmpty(id);
    return Promise.resolve(done).then(function () { if (first) mark("switchyard:chart-drawn:" + id); });
  }

  // The opening (or a range's) draw: one react per chart, then a mark the bench reads.
  function renderAll() {
    Promise.all(Object.keys(charts).map(render)).then(function () { mark("switchyard:charts-drawn"); });
  }

  var frame = null;
  function flush() {
    frame = null;
    Object.keys(charts).forEach(function (id) {
      var c = charts[id];
      if (!c.drawn) return;
      if (c.fresh) { render(id); return; }
      var idx = Object.keys(c.pending).map(Number);
      if (!idx.length) return;
      Plotly.extendTraces(c.el, { x: idx.map(function (i) { return c.pending[i].x; }),
                                  y: idx.map(function (i) { return c.pending[i].y; }) }, idx, MAX_POINTS);
      c.pending = {};
      c.el.dataset.points = c.count;
      showEmpty(id);
    });
  }

  function schedule() {
    if (frame === null) frame = requestAnimationFrame(flush);
  }

  function seriesKey(p) {
    return cfg.mode === "model" ? p.cluster + " v" + p.version : p.model + " v" + p.version;
  }

  function onPoint(p) {
    if (p.node !== "") return; // charts show versions over all nodes; per-node points are for tools
    var t = new Date(p.ts * 1000), key = seriesKey(p);
    add("chart-rate", key, t, p.request_rate);
    add("chart-success", key, t, p.success_rate);
    add("chart-latency", key + " avg", t, p.avg_ms);
    add("chart-latency", key + " p99", t, p.p99_ms, { line: { dash: "dot" } });
    add("chart-queue", key, t, p.queue_ms);
    add("chart-tokens", key, t, p.tokens_per_s);
  }

  function nodeBadge(p) {
    var badge = document.querySelector('[data-node-badge="' + p.node + '"]');
    if (!badge) return;
    badge.textContent = p.stale ? "down" : "up";
    badge.className = "badge text-bg-" + (p.stale ? "danger" : "success");
    badge.title = p.error || "";
  }

  function onNode(p) {
    var t = new Date(p.ts * 1000);
    if (Date.now() - t < 30000) { nodeState[p.node] = p; nodeBadge(p); } // not for old history
    if (p.stale) {
      add("chart-cpu", p.node + " down", t, 0, { mode: "markers", marker: { symbol: "x", size: 10, color: "#fd7e14" } });
      return;
    }
    if (p.cpu_util !== null && p.cpu_util !== undefined) add("chart-cpu", p.node, t, p.cpu_util * 100);
    if (p.mem_used !== null && p.mem_used !== undefined) add("chart-mem", p.node, t, p.mem_used / 1073741824);
    (p.gpus || []).forEach(function (g) {
      if (g.util !== null) add("chart-gpu", p.node + " " + g.gpu_uuid.slice(0, 12), t, g.util * 100);
    });
  }

  // Once points arrive the reason of an empty traffic chart follows what they say.
  function updateTrafficReason() {
    var nodes = Object.keys(nodeState).map(function (k) { return nodeState[k]; });
    if (!nodes.length) return;
    var down = nodes.filter(function (p) { return p.stale; });
    cfg.empty.traffic = down.length === nodes.length
      ? "Node down: no node answers its metrics scrape (" + down.map(function (p) { return p.node + ": " + (p.error || "no answer"); }).join("; ") + ")."
      : cfg.empty.no_traffic;
    ["chart-rate", "chart-success", "chart-latency", "chart-queue"].forEach(showEmpty);
  }

  function setBadge(text, tone) {
    var el = document.getElementById("ws-badge");
    el.textContent = text;
    el.className = "badge text-bg-" + tone;
  }

  function connect(delay) {
    var proto = location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(proto + location.host + cfg.ws);
    ws.onopen = function () { delay = 1000; setBadge("live", "success"); };
    ws.onmessage = function (e) {
      var p = JSON.parse(e.data);
      lastMessageAt = Date.now();
      if (p.type === "point" || p.type === "node") {
        received += 1;
        document.getElementById("point-count").textContent = received;
      }
      if (mode !== "live") return;
      if (p.type === "point") { onPoint(p); schedule(); }
      else if (p.type === "node") { onNode(p); updateTrafficReason(); schedule(); }
    };
    ws.onclose = function () {
      setBadge("stale: reconnecting…", "warning");
      setTimeout(function () { connect(Math.min(delay * 2, 15000)); }, delay);
    };
  }

  function resetCharts(spanS) {
    Object.keys(SPECS).forEach(function (id) {
      if (charts[id] && charts[id].drawn) Plotly.purge(charts[id].el);
      delete charts[id];
      initChart(id, spanS);
    });
  }

  function drawInitial() {
    var initial = cfg.initial || { points: [], nodes: [] };
    initial.points.forEach(onPoint);
    initial.nodes.forEach(onNode);
    renderAll();
    var drawn = initial.points.length + initial.nodes.length;
    var el = document.getElementById("chart-rate");
    if (el) el.dataset.history = initial.points.length;
    document.getElementById("history-count").textContent = drawn;
  }

  function seriesName(s) {
    return cfg.mode === "model" ? s.cluster + " v" + s.version : s.model + " v" + s.version;
  }

  function drawModelSeries(series) {
    series.forEach(function (s) {
      var t = s.t.map(function (e) { return new Date(e * 1000); }), key = seriesName(s);
      addSeries("chart-rate", key, t, s.request_rate);
      addSeries("chart-success", key, t, s.success_rate);
      addSeries("chart-latency", key + " avg", t, s.avg_ms);
      addSeries("chart-latency", key + " p99", t, s.p99_ms, { line: { dash: "dot" } });
      addSeries("chart-queue", key, t, s.queue_ms);
      if (s.tokens_per_s) addSeries("chart-tokens", key, t, s.tokens_per_s);
    });
  }

  function drawNodeSeries(series) {
    series.forEach(function (s) {
      var t = s.t.map(function (e) { return new Date(e * 1000); });
      addSeries("chart-cpu", s.node, t, s.cpu_util.map(function (v) { return v === null ? null : v * 100; }));
      addSeries("chart-gpu", s.node + " avg", t, s.gpu_util.map(function (v) { return v === null ? null : v * 100; }));
    });
  }

  // A chart shows at most a point per pixel of its width: the server sums finer rollups into
  // buckets (5 minutes for a day on a chart under 1,441 px; p99 stays the bucket's worst).
  function widestChart() {
    var px = 0;
    document.querySelectorAll(".live-chart").forEach(function (el) { px = Math.max(px, el.clientWidth); });
    return Math.min(MAX_POINTS, Math.max(100, Math.round(px || MAX_POINTS)));
  }

  function fetchSeries(params) {
    var query = new URLSearchParams(Object.assign({ shape: "series" }, params));
    return fetch("/api/v1/metrics/?" + query, { credentials: "same-origin" })
      .then(function (r) { return r.json(); });
  }

  // A range's history: the server picks the resolution (step_s); each chart drawn once.
  function askHistory(range) {
    var fields = "request_rate,success_rate,avg_ms,p99_ms,queue_ms";
    if (document.getElementById("chart-tokens")) fields += ",tokens_per_s";
    var drawn = { since: range, fields: fields, max_points: widestChart() };
    var asked = [fetchSeries(Object.assign(drawn, cfg.history))];
    if (cfg.mode === "cluster") {
      asked.push(fetchSeries({ since: range, kind: "node", cluster: cfg.history.cluster, max_points: widestChart() }));
    }
    return Promise.all(asked);
  }

  // A page opened on a range asks for it at once: this script runs before Plotly's (the
  // template loads it first), so the server works while the browser compiles Plotly.
  var SPANS = { "1h": 3600, "24h": 86400 };
  var openedOn = new URLSearchParams(location.search).get("range");
  var early = SPANS[openedOn] ? { range: openedOn, answers: askHistory(openedOn) } : null;

  function loadHistory(range) {
    var answers = early && early.range === range ? early.answers : askHistory(range);
    early = null;
    answers.then(function (answers) {
      if (mode !== range) return;  // another range was chosen meanwhile
      var series = answers[0].series || [];
      document.getElementById("history-empty").classList.toggle("d-none", series.length > 0);
      document.getElementById("history-step").textContent = answers[0].resolution || "";
      drawModelSeries(series);
      if (answers[1]) drawNodeSeries(answers[1].series || []);
      renderAll();
      var el = document.getElementById("chart-rate");
      if (el) el.dataset.history = series.reduce(function (n, s) { return n + s.t.length; }, 0);
    });
  }

  function onRange(button) {
    document.querySelectorAll("[data-range]").forEach(function (b) {
      b.classList.toggle("active", b === button);
      b.setAttribute("aria-pressed", b === button ? "true" : "false");
    });
    mode = button.dataset.range;
    document.getElementById("history-note").classList.toggle("d-none", mode === "live");
    resetCharts(SPANS[mode] || cfg.window_s);
    var url = new URL(location.href);
    if (mode === "live") url.searchParams.delete("range"); else url.searchParams.set("range", mode);
    history.replaceState(null, "", url);
    if (mode !== "live") loadHistory(mode);
    else drawInitial();
  }

  // The live window slides with the clock, whether or not points arrive.
  function slide() {
    if (mode !== "live") return;
    Object.keys(charts).forEach(function (id) {
      if (charts[id].count && charts[id].drawn) Plotly.relayout(charts[id].el, { "xaxis.range": windowRange(cfg.window_s) });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-range]").forEach(function (b) {
      b.addEventListener("click", function () { onRange(b); });
    });
    // ?range=24h opens straight on that range (a link to it, or a reload, keeps it).
    var asked = document.querySelector('[data-range="' + new URLSearchParams(location.search).get("range") + '"]');
    if (asked && asked.dataset.range !== "live") onRange(asked);
    else {
      Object.keys(SPECS).forEach(function (id) { initChart(id, cfg.window_s); });
      drawInitial();
    }
    connect(1000);
    setInterval(slide, 5000);
    // No message for 10 s while connected: say so instead of showing old lines as current.
    setInterval(function () {
      var el = document.getElementById("ws-badge");
      if (el.textContent === "live" && lastMessageAt && Date.now() - lastMessageAt > 10000) {
        setBadge("stale: no data", "warning");
      } else if (el.textContent === "stale: no data" && Date.now() - lastMessageAt < 10000) {
        setBadge("live", "success");
      }
    }, 2000);
  });
})();
