// A release plan's page: the grid, approvals and events are fetched again whenever
// /ws/plans/<id>/ says the plan or one of its releases changed, the cost card too when the
// plan itself changed. While that socket is down the
// badge says so and the page polls every 5 s until it reconnects. A form being filled in is
// never replaced under the user's hands: the refresh waits until it loses focus.
(function () {
  "use strict";
  var TERMINAL = ["SUCCEEDED", "REFUSED", "ROLLED_BACK"];

  function typing(box) {
    var el = document.activeElement;
    return el && box.contains(el) && el.closest("form") !== null;
  }

  function swap(box, html) {
    var next = new DOMParser().parseFromString(html, "text/html");
    next.querySelectorAll("[data-live-part][id]").forEach(function (part) {
      var here = document.getElementById(part.id);
      if (!here) return;
      var fresh = document.importNode(part, true);
      here.replaceWith(fresh);
      window.Switchyard.localTimes(fresh);
    });
    box.dataset.refreshed = String(Number(box.dataset.refreshed || 0) + 1);
  }

  // At most one request in flight, one more queued; none while a form in the grid has focus.
  // run(true) asks for the cost card as well (the plan itself changed).
  function refresher(box) {
    var busy = false, again = false, cost = false;
    function run(withCost) {
      cost = cost || withCost === true;
      if (typing(box)) { box.addEventListener("focusout", run, {once: true}); return; }
      if (busy) { again = true; return; }
      busy = true;
      var url = box.dataset.liveUrl + (cost ? "?cost=1" : "");
      cost = false;
      fetch(url, {credentials: "same-origin", headers: {"HX-Request": "true"}})
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) { swap(box, html); })
        .catch(function () { /* the next change or poll tries again */ })
        .finally(function () { busy = false; if (again) { again = false; run(); } });
    }
    return run;
  }

  function follow(box) {
    var refresh = refresher(box);
    window.Switchyard.follow(box, refresh,
      function (p) { refresh(p.changed === "plan"); },
      function (p) { return p.changed === "plan" && TERMINAL.indexOf(p.phase) >= 0; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("plan-live");
    if (box && box.dataset.ws) follow(box);
  });
})();
