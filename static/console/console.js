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

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    document.querySelectorAll("[data-ws]").forEach(liveBadge);
  });
  document.addEventListener("htmx:afterSwap", function (e) { localTimes(e.target); });
})();
