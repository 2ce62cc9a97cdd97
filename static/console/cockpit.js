// Release cockpit: baseline vs candidate per analysed interval, SLA drawn as a line, and
// a confirmation naming the consequence (with a reason) before any action runs. The
// changing part is fetched again whenever /ws/releases/<id>/ says the release changed; while
// that socket is down the badge says so and the page polls until it reconnects.
(function () {
  "use strict";

  var TERMINAL = ["SUCCEEDED", "ROLLED_BACK", "FAILED"];
  var MARKERS_UP_TO = 300;
  window.cockpitCountdown = true;  // console.js leaves [data-next-check] to this page

  // A role's measures come as columns, one value per interval; a column no interval has is
  // left out (null throughout).
  function column(measures, metric, seconds, n) {
    var values = measures[metric === "rps" ? "requests" : metric] || [];
    var out = [];
    for (var i = 0; i < n; i++) {
      var v = values[i] == null ? null : values[i];
      out.push(metric === "rps" ? (v != null && seconds[i] ? v / seconds[i] : null) : v);
    }
    return out;
  }

  function draw(el, data) {
    var metric = el.dataset.metric;
    var times = data.t.map(function (t) { return new Date(t * 1000); });
    var seconds = data.seconds || [];
    var results = data.results || [];
    var series = function (role, name, color) {
      return {x: times, y: column(data[role] || {}, metric, seconds, times.length),
              name: name, mode: "lines+markers", line: {color: color}};
    };
    var candidate = series("candidate", "candidate", "#0d6efd");
    var traces = [series("baseline", "baseline", "#6c757d"), candidate];
    var colour = function (r) { return r === "fail" ? "#dc3545" : r === "inconclusive" ? "#ffc107" : "#0d6efd"; };
    if (times.length <= MARKERS_UP_TO) {  // a failed gate is red at the interval where it failed
      candidate.marker = {size: 8, color: results.map(colour)};
    } else {  // a marker is an SVG element per point: lines, and markers where a gate failed
      traces.forEach(function (tr) { tr.mode = "lines"; });
      var flagged = results.map(function (r, i) { return r === "fail" || r === "inconclusive" ? i : -1; })
        .filter(function (i) { return i >= 0; });
      traces.push({x: flagged.map(function (i) { return times[i]; }), y: flagged.map(function (i) { return candidate.y[i]; }),
                   name: "failed or inconclusive", mode: "markers",
                   marker: {size: 8, color: flagged.map(function (i) { return colour(results[i]); })}});
    }
    var limits = (data.limits || {})[metric];
    if (limits && limits.some(function (v) { return v != null; })) {
      traces.push({x: times, y: limits, name: "gate vs baseline",
                   mode: times.length > MARKERS_UP_TO ? "lines" : "lines+markers",
                   line: {dash: "dash", color: "#fd7e14", shape: "hv"},
                   marker: {symbol: "line-ew-open", size: 14, color: "#fd7e14"}});
    }
    var values = traces.reduce(function (all, tr) {
      return all.concat(tr.y.filter(function (v) { return v != null; }));
    }, []);
    var lo = values.length ? Math.min.apply(null, values) : 0;
    var hi = values.length ? Math.max.apply(null, values) : 1;
    var sla = el.dataset.sla ? data.sla[el.dataset.sla] : null;
    var annotations = [];
    // The SLA as a dotted line; when it is far above the data (a p99 SLA of 500 ms over
    // 5 ms samples) it is named instead, so the comparison stays readable.
    var far = sla != null && hi > 0 && (sla > 3 * hi || sla < lo - 3 * (hi - lo + 1));
    var shapes = [];
    if (sla != null && times.length && !far) {  // across the whole width, one point or many
      shapes.push({type: "line", xref: "paper", x0: 0, x1: 1, y0: sla, y1: sla,
                   line: {dash: "dot", color: "#dc3545", width: 1.5}});
      lo = Math.min(lo, sla); hi = Math.max(hi, sla);
    } else if (far && times.length) {
      annotations.push({xref: "paper", yref: "paper", x: 1, y: 1, xanchor: "right",
                        yanchor: "top", showarrow: false, font: {size: 11, color: "#dc3545"},
                        text: "SLA " + sla + " (off the chart)"});
    }
    if (values.length) {  // each step change as a vertical line, labelled with its weight
      data.weights.forEach(function (w, i) {
        if (i > 0 && w !== data.weights[i - 1]) {
          traces.push({x: [times[i], times[i]], y: [lo, hi], mode: "lines", showlegend: false,
                       line: {dash: "dash", color: "#adb5bd", width: 1}, hoverinfo: "text",
                       text: w + "%", name: "step " + w + "%"});
        }
      });
    }
    // Title and legend live in the page (above the chart) so nothing overflows the box.
    var xaxis = {type: "date"};
    if (times.length === 1) {  // one interval: a minute around it, not milliseconds
      xaxis.range = [new Date(times[0].getTime() - 30000), new Date(times[0].getTime() + 30000)];
    }
    return Plotly.react(el, traces, {height: el.clientHeight || 200, autosize: true, showlegend: false,
      xaxis: xaxis, shapes: shapes, annotations: annotations, margin: {l: 40, r: 10, t: 10, b: 30}},
      {displayModeBar: false, responsive: true});
  }

  // The fast guard's per-tick samples: error rate, its lower bound, the limit, the trip.
  function drawGuard(el, samples) {
    var t = samples.map(function (s) { return new Date(s.at * 1000); });
    var pick = function (key) { return samples.map(function (s) { return s[key]; }); };
    var tripped = samples.filter(function (s) { return s.tripped; });
    var traces = [
      {x: t, y: pick("error_pct"), name: "error %", mode: t.length > MARKERS_UP_TO ? "lines" : "lines+markers",
       line: {color: "#0d6efd"}, marker: {size: 3}},
      {x: t, y: pick("lower_pct"), name: "lower bound %", mode: "lines", line: {color: "#6f42c1"}},
      {x: t, y: pick("limit_pct"), name: "limit %", mode: "lines", line: {color: "#dc3545", dash: "dot"}},
      {x: tripped.map(function (s) { return new Date(s.at * 1000); }), y: tripped.map(function (s) { return s.lower_pct; }),
       name: "tripped", mode: "markers", marker: {symbol: "x", size: 12, color: "#dc3545"}}
    ];
    var xaxis = {type: "date"};
    if (t.length === 1) xaxis.range = [new Date(t[0].getTime() - 30000), new Date(t[0].getTime() + 30000)];
    el.dataset.samples = String(samples.length);
    return Plotly.react(el, traces, {height: el.clientHeight || 180, autosize: true, showlegend: false,
      xaxis: xaxis, yaxis: {rangemode: "tozero"}, margin: {l: 40, r: 10, t: 10, b: 30}},
      {displayModeBar: false, responsive: true});
  }

  function mark(name) {
    if (window.performance && performance.mark) performance.mark(name);
  }

  function embedded(root, id) {
    var script = root.querySelector("#" + id);
    return script ? JSON.parse(script.textContent) : null;
  }

  // Each chart is drawn once from the arrays the page embeds (one script per kind of chart);
  // a chart kept across a refresh (its data unchanged) is not drawn again.
  function drawAll(root) {
    if (!window.Plotly) return Promise.resolve();
    var drawn = [];
    var kinds = [["cockpit-chart", "[data-chart]", draw], ["cockpit-guard", "[data-guard]", drawGuard]];
    kinds.forEach(function (kind) {
      var fresh = Array.prototype.filter.call(root.querySelectorAll(kind[1]), function (el) {
        return !el.dataset.drawn;
      });
      if (!fresh.length) return;
      var data = embedded(root, kind[0]);
      fresh.forEach(function (el) {
        el.dataset.drawn = "1";  // Plotly.react's promise settles once it is on screen
        drawn.push(Promise.resolve(kind[2](el, data)).then(function () {
          mark("switchyard:chart-drawn:" + el.id);
        }));
      });
    });
    return Promise.all(drawn);
  }

  // The refetched part replaces the old, except charts whose data did not change: the drawn
  // ones are moved into the new part instead of being drawn again.
  function swap(box, html) {
    var next = document.createElement("div");
    next.innerHTML = html;
    [["cockpit-chart", "[data-chart]"], ["cockpit-guard", "[data-guard]"]].forEach(function (kind) {
      var before = box.querySelector("#" + kind[0]), after = next.querySelector("#" + kind[0]);
      if (!before || !after || before.textContent !== after.textContent) return;
      next.querySelectorAll(kind[1]).forEach(function (el) {
        var old = box.querySelector("#" + el.id);
        if (old && old.dataset.drawn) el.replaceWith(old);
      });
    });
    box.replaceChildren.apply(box, Array.prototype.slice.call(next.childNodes));
    drawAll(box);
    box.dataset.refreshed = String(Number(box.dataset.refreshed || 0) + 1);
  }

  function tickCountdown() {
    document.querySelectorAll("[data-next-check]").forEach(function (el) {
      var left = Math.round(parseFloat(el.dataset.nextCheck) - Date.now() / 1000);
      el.textContent = left > 0 ? "next check in " + left + " s" : "checking…";
    });
  }

  // Fetch the changing part again; at most one request in flight, one more queued.
  function refresher(box) {
    var busy = false, again = false;
    function run() {
      if (busy) { again = true; return; }
      busy = true;
      fetch(box.dataset.liveUrl, {credentials: "same-origin", headers: {"HX-Request": "true"}})
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) { swap(box, html); tickCountdown(); })
        .catch(function () { /* the next change or poll tries again */ })
        .finally(function () { busy = false; if (again) { again = false; run(); } });
    }
    return run;
  }

  function follow(box) {
    var refresh = refresher(box);
    var finished = window.Switchyard.follow(box, refresh, function () { refresh(); },
      function (p) { return TERMINAL.indexOf(p.phase) >= 0; });
    // The guard's samples change every tick without a websocket message: redraw now and then.
    var slow = setInterval(function () { if (finished()) clearInterval(slow); else refresh(); }, 5000);
  }

  document.addEventListener("submit", function (event) {
    var form = event.target.closest(".release-action");
    if (!form) return;
    var reason = window.prompt(form.dataset.consequence + "\n\nReason (recorded in the audit trail):", "");
    if (reason === null) { event.preventDefault(); return; }
    form.querySelector("input[name=reason]").value = reason;
  });
  document.addEventListener("DOMContentLoaded", function () {
    drawAll(document).then(function () { mark("switchyard:charts-drawn"); });
    tickCountdown();
    setInterval(tickCountdown, 1000);
    var box = document.getElementById("cockpit-live");
    if (box && box.dataset.ws) follow(box);
  });
})();
