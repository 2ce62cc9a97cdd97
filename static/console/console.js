// Console helpers: local times with UTC on hover, a self-reconnecting websocket badge, and
// `Switchyard.follow` for live pages (the release cockpit, a plan's page).
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

  function setBadge(text, tone) {
    var el = document.getElementById("ws-badge");
    if (!el) return;
    el.textContent = text;
    el.className = "badge text-bg-" + tone;
  }

  // Follow the socket at box.dataset.ws: each message goes to onMessage(payload), and one for
  // which isFinal(payload) holds closes it ("finished"). While it is down the #ws-badge says
  // so and refresh() runs every 5 s; after a reconnect refresh(true) catches up on what was
  // missed (the page itself is current at the first open).
  function follow(box, refresh, onMessage, isFinal) {
    var poll = null, delay = 1000, finished = false, opened = false;
    box.dataset.updates = "0";
    function connect() {
      var proto = location.protocol === "https:" ? "wss://" : "ws://";
      var ws = new WebSocket(proto + location.host + box.dataset.ws);
      ws.onopen = function () {
        delay = 1000;
        if (poll) { clearInterval(poll); poll = null; }
        setBadge("live", "success");
        if (opened) refresh(true);
        opened = true;
      };
      ws.onmessage = function (e) {
        var payload = JSON.parse(e.data);
        box.dataset.updates = String(parseInt(box.dataset.updates, 10) + 1);
        onMessage(payload);
        if (isFinal(payload)) { finished = true; ws.close(); }
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
    return function () { return finished; };
  }

  window.Switchyard = {localTimes: localTimes, setBadge: setBadge, follow: follow};

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
