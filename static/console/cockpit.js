// Release cockpit: baseline vs candidate per analysed interval, SLA drawn as a line, and
// a confirmation naming the consequence (with a reason) before any action runs.
(function () {
  "use strict";

  function draw(el) {
    if (!window.Plotly) return;
    var data = JSON.parse(el.dataset.chart);
    var metric = el.dataset.metric;
    var times = data.t.map(function (t) { return new Date(t * 1000); });
    var series = function (role, name, color) {
      return {x: times, y: data[role].map(function (m) { return m[metric]; }), name: name,
              mode: "lines+markers", line: {color: color}};
    };
    var traces = [series("baseline", "baseline", "#6c757d"), series("candidate", "candidate", "#0d6efd")];
    var sla = data.sla[el.dataset.sla];
    if (sla != null && times.length) {  // the SLA as a dotted line across the chart
      traces.push({x: [times[0], times[times.length - 1]], y: [sla, sla], name: "SLA",
                   mode: "lines", line: {dash: "dot", color: "#dc3545"}, hoverinfo: "y"});
    }
    var values = traces.reduce(function (all, tr) {
      return all.concat(tr.y.filter(function (v) { return v != null; }));
    }, []);
    if (values.length) {  // each step change as a vertical line, labelled with its weight
      var lo = Math.min.apply(null, values), hi = Math.max.apply(null, values);
      data.weights.forEach(function (w, i) {
        if (i > 0 && w !== data.weights[i - 1]) {
          traces.push({x: [times[i], times[i]], y: [lo, hi], mode: "lines", showlegend: false,
                       line: {dash: "dash", color: "#adb5bd", width: 1}, hoverinfo: "text",
                       text: w + "%", name: "step " + w + "%"});
        }
      });
    }
    // Title and legend live in the page (above the chart) so nothing overflows the box.
    Plotly.react(el, traces, {height: 200, autosize: true, showlegend: false,
      margin: {l: 40, r: 10, t: 10, b: 30}}, {displayModeBar: false, responsive: true});
  }

  function drawAll(root) { root.querySelectorAll("[data-chart]").forEach(draw); }

  document.addEventListener("submit", function (event) {
    var form = event.target.closest(".release-action");
    if (!form) return;
    var reason = window.prompt(form.dataset.consequence + "\n\nReason (recorded in the audit trail):", "");
    if (reason === null) { event.preventDefault(); return; }
    form.querySelector("input[name=reason]").value = reason;
  });
  window.addEventListener("load", function () { drawAll(document); });
  document.addEventListener("htmx:afterSwap", function (e) { drawAll(e.target); });
})();
