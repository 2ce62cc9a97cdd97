// Benchmark charts on the version page: throughput vs p99 (this version, production, SLA)
// and the latency distribution per level. Data comes from the json_script block.
(function () {
  "use strict";

  function draw() {
    const node = document.getElementById("benchmark-chart-data");
    if (!node || !window.Plotly) return;
    const data = JSON.parse(node.textContent);
    const measured = (levels) => levels.filter((l) => l.p99_ms !== null && l.p99_ms !== undefined);
    const layout = (title, x, y) => ({
      title: { text: title, font: { size: 14 } },
      margin: { t: 36, r: 16, b: 44, l: 56 },
      xaxis: { title: { text: x } },
      yaxis: { title: { text: y }, rangemode: "tozero" },
      legend: { orientation: "h", y: -0.25 },
    });

    const curves = data.series.map((s, i) => {
      const levels = measured(s.levels);
      return {
        name: s.label,
        x: levels.map((l) => l.throughput_rps),
        y: levels.map((l) => l.p99_ms),
        text: levels.map((l) => "concurrency " + l.concurrency),
        mode: "lines+markers",
        line: { dash: i === 0 ? "solid" : "dot" },
      };
    });
    const curveLayout = layout("Throughput vs p99 latency", "requests/s", "p99 ms");
    if (data.sla_p99_ms !== null && data.sla_p99_ms !== undefined) {
      curveLayout.shapes = [{
        type: "line", xref: "paper", x0: 0, x1: 1, y0: data.sla_p99_ms, y1: data.sla_p99_ms,
        line: { color: "#dc3545", dash: "dash", width: 1.5 },
      }];
      curveLayout.annotations = [{
        xref: "paper", x: 1, y: data.sla_p99_ms, xanchor: "right", yanchor: "bottom",
        text: "SLA p99 " + data.sla_p99_ms + " ms", showarrow: false, font: { color: "#dc3545" },
      }];
    }
    Plotly.newPlot("benchmark-curve", curves, curveLayout, { displayModeBar: false, responsive: true });

    const own = data.series.length ? measured(data.series[0].levels) : [];
    const bars = ["p50_ms", "p90_ms", "p95_ms", "p99_ms"].map((key) => ({
      type: "bar",
      name: key.replace("_ms", ""),
      x: own.map((l) => "c=" + l.concurrency),
      y: own.map((l) => l[key]),
    }));
    const barLayout = layout("Latency distribution per level", "concurrency", "ms");
    barLayout.barmode = "group";
    Plotly.newPlot("benchmark-distribution", bars, barLayout, { displayModeBar: false, responsive: true });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
