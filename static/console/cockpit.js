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
    Plotly.react(el, traces, {title: {text: el.dataset.title, font: {size: 13}},
      height: el.clientHeight, margin: {l: 40, r: 10, t: 30, b: 30},
      legend: {orientation: "h", x: 1, xanchor: "right", y: 1.18}}, {displayModeBar: false});
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
