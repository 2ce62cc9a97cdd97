// Live telemetry charts: Plotly traces extended from websocket points, SLA lines,
// stale nodes, a reconnecting socket with a visible "stale" badge, and history ranges.
(function () {
  "use strict";
  var MAX_POINTS = 900;
  var cfg = JSON.parse(document.getElementById("live-config").textContent);
  var charts = {};
  var received = 0;
  var mode = "live";
  var lastMessageAt = 0;

  var SPECS = {
    "chart-rate": { title: "requests/s", sla: "min_throughput_rps", field: "request_rate" },
    "chart-success": { title: "success %", sla: "min_success_rate", field: "success_rate" },
    "chart-latency": { title: "latency ms (avg ── p99 ┄)", sla: "p99_latency_ms" },
    "chart-queue": { title: "queue ms", sla: "max_queue_ms", field: "queue_ms" },
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

  function initChart(id) {
    var el = document.getElementById(id);
    if (!el) return;
    var spec = SPECS[id], sla = slaShapes(spec);
    charts[id] = { el: el, index: {}, count: 0 };
    Plotly.newPlot(el, [], {
      title: { text: spec.title, font: { size: 13 } }, margin: { l: 45, r: 10, t: 30, b: 30 },
      xaxis: { type: "date" }, showlegend: true, legend: { orientation: "h", y: -0.2, font: { size: 10 } },
      shapes: sla.shapes, annotations: sla.annotations
    }, { displayModeBar: false, responsive: true });
  }

  function add(id, key, t, y, style) {
    var c = charts[id];
    if (!c || y === null || y === undefined) return;
    if (!(key in c.index)) {
      c.index[key] = c.el.data.length;
      Plotly.addTraces(c.el, Object.assign({ x: [t], y: [y], name: key, mode: "lines+markers",
                                              marker: { size: 3 } }, style || {}));
    } else {
      Plotly.extendTraces(c.el, { x: [[t]], y: [[y]] }, [c.index[key]], MAX_POINTS);
    }
    c.count += 1;
    c.el.dataset.points = c.count;
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
  }

  function onNode(p) {
    var t = new Date(p.ts * 1000);
    var badge = document.querySelector('[data-node-badge="' + p.node + '"]');
    if (badge) {
      badge.textContent = p.stale ? "stale" : "up";
      badge.className = "badge text-bg-" + (p.stale ? "warning" : "success");
      badge.title = p.error || "";
    }
    if (p.stale) {
      add("chart-cpu", p.node + " stale", t, 0, { mode: "markers", marker: { symbol: "x", size: 10, color: "#fd7e14" } });
      return;
    }
    if (p.cpu_util !== null) add("chart-cpu", p.node, t, p.cpu_util * 100);
    if (p.mem_used !== null) add("chart-mem", p.node, t, p.mem_used / 1073741824);
    (p.gpus || []).forEach(function (g) {
      if (g.util !== null) add("chart-gpu", p.node + " " + g.gpu_uuid.slice(0, 12), t, g.util * 100);
    });
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
      if (p.type === "point") onPoint(p);
      else if (p.type === "node") onNode(p);
    };
    ws.onclose = function () {
      setBadge("stale: reconnecting…", "warning");
      setTimeout(function () { connect(Math.min(delay * 2, 15000)); }, delay);
    };
  }

  function resetCharts() {
    Object.keys(SPECS).forEach(function (id) {
      if (charts[id]) Plotly.purge(charts[id].el);
      delete charts[id];
      initChart(id);
    });
  }

  function loadHistory(range) {
    var params = new URLSearchParams(Object.assign({ since: range }, cfg.history));
    fetch("/api/v1/metrics/?" + params, { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (answer) {
        var points = answer.points || [];
        document.getElementById("history-empty").classList.toggle("d-none", points.length > 0);
        points.forEach(function (p) {
          var t = new Date(p.ts), key = seriesKey(p);
          add("chart-rate", key, t, p.request_rate);
          add("chart-success", key, t, p.success_rate);
          add("chart-latency", key + " avg", t, p.avg_ms);
          add("chart-latency", key + " p99", t, p.p99_ms, { line: { dash: "dot" } });
          add("chart-queue", key, t, p.queue_ms);
        });
      });
  }

  function onRange(button) {
    document.querySelectorAll("[data-range]").forEach(function (b) { b.classList.toggle("active", b === button); });
    mode = button.dataset.range;
    document.getElementById("history-note").classList.toggle("d-none", mode === "live");
    resetCharts();
    if (mode !== "live") loadHistory(mode);
  }

  document.addEventListener("DOMContentLoaded", function () {
    Object.keys(SPECS).forEach(initChart);
    document.querySelectorAll("[data-range]").forEach(function (b) {
      b.addEventListener("click", function () { onRange(b); });
    });
    connect(1000);
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
