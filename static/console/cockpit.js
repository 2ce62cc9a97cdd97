// Release cockpit: baseline vs candidate per analysed interval, SLA drawn as a line, and
// a confirmation naming the consequence (with a reason) before any action runs. The
// changing part is fetched again whenever /ws/releases/<id>/ says the release changed; while
// that socket is down the badge says so and the page polls until it reconnects.
(function () {
  "use strict";

  var TERMINAL = ["SUCCEEDED", "ROLLED_BACK", "FAILED"];

  function value(m, metric, seconds) {
    if (metric === "rps") return m.requests != null && seconds ? m.requests / seconds : null;
    return m[metric];
  }

  function draw(el) {
    if (!window.Plotly) return;
    var data = JSON.parse(el.dataset.chart);
    var metric = el.dataset.metric;
    var times = data.t.map(function (t) { return new Date(t * 1000); });
    var seconds = data.seconds || [];
    var series = function (role, name, color) {
      return {x: times, y: data[role].map(function (m, i) { return value(m, metric, seconds[i]); }),
              name: name, mode: "lines+markers", line: {color: color}};
    };
    var traces = [series("baseline", "baseline", "#6c757d"), series("candidate", "candidate", "#0d6efd")];
    var sla = el.dataset.sla ? data.sla[el.dataset.sla] : null;
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
    Plotly.react(el, traces, {height: el.clientHeight || 200, autosize: true, showlegend: false,
      margin: {l: 40, r: 10, t: 10, b: 30}}, {displayModeBar: false, responsive: true});
  }

  function drawAll(root) { root.querySelectorAll("[data-chart]").forEach(draw); }

  function tickCountdown() {
    document.querySelectorAll("[data-next-check]").forEach(function (el) {
      var left = Math.round(parseFloat(el.dataset.nextCheck) - Date.now() / 1000);
      el.textContent = left > 0 ? "next check in " + left + " s" : "checking…";
    });
  }

  function setBadge(text, tone) {
    var el = document.getElementById("ws-badge");
    if (!el) return;
    el.textContent = text;
    el.className = "badge text-bg-" + tone;
  }

  // Fetch the changing part again; at most one request in flight, one more queued.
  function refresher(box) {
    var busy = false, again = false;
    function run() {
      if (busy) { again = true; return; }
      busy = true;
      fetch(box.dataset.liveUrl, {credentials: "same-origin", headers: {"HX-Request": "true"}})
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) { box.innerHTML = html; drawAll(box); tickCountdown(); })
        .catch(function () { /* the next change or poll tries again */ })
        .finally(function () { busy = false; if (again) { again = false; run(); } });
    }
    return run;
  }

  function follow(box) {
    var refresh = refresher(box), poll = null, delay = 1000, finished = false;
    box.dataset.updates = "0";
    function connect() {
      var proto = location.protocol === "https:" ? "wss://" : "ws://";
      var ws = new WebSocket(proto + location.host + box.dataset.ws);
      ws.onopen = function () {
        delay = 1000;
        if (poll) { clearInterval(poll); poll = null; }
        setBadge("live", "success");
        refresh();  // catch up on anything missed while disconnected
      };
      ws.onmessage = function (e) {
        var p = JSON.parse(e.data);
        box.dataset.updates = String(parseInt(box.dataset.updates, 10) + 1);
        refresh();
        if (TERMINAL.indexOf(p.phase) >= 0) { finished = true; ws.close(); }
      };
      ws.onclose = function () {
        if (finished) { setBadge("finished", "secondary"); return; }
        setBadge("stale: reconnecting…", "warning");
        if (!poll) poll = setInterval(refresh, 5000);
        setTimeout(connect, delay);
        delay = Math.min(delay * 2, 15000);
      };
    }
    connect();
  }

  document.addEventListener("submit", function (event) {
    var form = event.target.closest(".release-action");
    if (!form) return;
    var reason = window.prompt(form.dataset.consequence + "\n\nReason (recorded in the audit trail):", "");
    if (reason === null) { event.preventDefault(); return; }
    form.querySelector("input[name=reason]").value = reason;
  });
  window.addEventListener("load", function () {
    drawAll(document);
    tickCountdown();
    setInterval(tickCountdown, 1000);
    var box = document.getElementById("cockpit-live");
    if (box && box.dataset.ws) follow(box);
  });
})();
