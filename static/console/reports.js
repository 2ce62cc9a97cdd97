// The Reports page: draws the server-built plotly figure and sorts tables by a heading.
(function () {
  "use strict";

  function draw() {
    const data = document.getElementById("cost-figure");
    const target = document.getElementById("cost-chart");
    if (!data || !target || !window.Plotly) return;
    const figure = JSON.parse(data.textContent);
    window.Plotly.newPlot(target, figure.data, figure.layout, { responsive: true, displaylogo: false });
  }

  function sortable(table) {
    table.querySelectorAll("th[data-sort]").forEach((th, column) => {
      th.style.cursor = "pointer";
      th.addEventListener("click", () => {
        const numeric = th.dataset.sort === "number";
        const down = th.dataset.dir !== "down";
        th.dataset.dir = down ? "down" : "up";
        const body = table.tBodies[0];
        const rows = Array.from(body.rows).filter((r) => r.cells.length > 1);
        const value = (row) => {
          const cell = row.cells[column];
          const raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
          return numeric ? (raw === "" ? -Infinity : parseFloat(raw)) : raw;
        };
        rows.sort((a, b) => {
          const x = value(a), y = value(b);
          const order = x < y ? -1 : x > y ? 1 : 0;
          return down ? -order : order;
        });
        rows.forEach((r) => body.appendChild(r));
      });
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    draw();
    document.querySelectorAll("table[data-sortable]").forEach(sortable);
  });
})();
