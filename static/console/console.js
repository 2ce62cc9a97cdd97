// Console helpers: local times with UTC on hover, and a self-reconnecting websocket badge.
(function () {
  "use strict";

  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (!isNaN(d)) {
        el.textContent = d.toLocaleString();
        el.title = d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
      }
    });
  }

  function liveBadge(el) {
    var delay = 1000;
    function connect() {
      var proto = location.protocol === "https:" ? "wss://" : "ws://";
      var ws = new WebSocket(proto + location.host + el.dataset.ws);
      ws.onopen = function () {
        delay = 1000;
        el.textContent = "live";
        el.className = el.className.replace(/text-bg-\w+/, "text-bg-success");
      };
      ws.onclose = function () {
        el.textContent = "stale: reconnecting…";
        el.className = el.className.replace(/text-bg-\w+/, "text-bg-warning");
        setTimeout(connect, delay);
        delay = Math.min(delay * 2, 15000);
      };
    }
    connect();
  }

  // "next check in N s" wherever a page names an epoch second (the cockpit keeps its own).
  function countdowns() {
    if (window.cockpitCountdown) return;
    document.querySelectorAll("[data-next-check]").forEach(function (el) {
      var left = Math.round(parseFloat(el.dataset.nextCheck) - Date.now() / 1000);
      el.textContent = left > 0 ? "next check in " + left + " s" : "checking…";
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    countdowns();
    setInterval(countdowns, 1000);
    // Badges only: the cockpit's box (also [data-ws]) follows its socket in cockpit.js, and a
    // second socket here would write "live" over its content.
    document.querySelectorAll(".badge[data-ws]").forEach(liveBadge);
  });
  document.addEventListener("htmx:afterSwap", function (e) { localTimes(e.target); });
})();
