// Upload form: sends the archive to the API with a progress bar, then shows the
// registered version or the errors (file and line) the server found.
(function () {
  "use strict";
  var form = document.getElementById("upload-form");
  if (!form) return;
  var bar = document.querySelector("#upload-progress .progress-bar");
  var box = document.getElementById("upload-progress");
  var result = document.getElementById("upload-result");
  var button = document.getElementById("upload-button");

  function escapeHtml(s) {
    var d = document.createElement("div");
    d.textContent = s == null ? "" : String(s);
    return d.innerHTML;
  }

  function showErrors(errors) {
    var items = (errors || []).map(function (e) {
      var where = [e.file || e.field, e.line ? "line " + e.line + (e.column ? ":" + e.column : "") : null]
        .filter(Boolean).join(", ");
      return "<li>" + (where ? "<b>" + escapeHtml(where) + "</b>: " : "") + escapeHtml(e.message) + "</li>";
    });
    result.innerHTML = '<div class="alert alert-danger" data-testid="upload-errors"><b>Not registered.</b><ul class="mb-0">' +
      items.join("") + "</ul></div>";
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var data = new FormData(form);
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.dataset.url);
    xhr.setRequestHeader("X-CSRFToken", data.get("csrfmiddlewaretoken"));
    data.delete("csrfmiddlewaretoken");
    box.classList.remove("d-none");
    button.disabled = true;
    result.innerHTML = "";
    xhr.upload.onprogress = function (e) {
      if (!e.lengthComputable) return;
      var pct = Math.round((100 * e.loaded) / e.total);
      bar.style.width = pct + "%";
      bar.textContent = pct < 100 ? pct + "%" : "validating…";
    };
    xhr.onload = function () {
      button.disabled = false;
      var body = {};
      try { body = JSON.parse(xhr.responseText); } catch (e) { body = {errors: [{message: "HTTP " + xhr.status}]}; }
      if (xhr.status === 201) {
        bar.textContent = "done";
        bar.classList.add("bg-success");
        var warnings = (body.validation && body.validation.warnings) || [];
        result.innerHTML = '<div class="alert alert-success" data-testid="upload-ok">Registered <a href="' +
          form.dataset.modelUrl + "versions/" + body.version + '/">version ' + body.version + "</a> (" +
          escapeHtml(body.label) + "), digest <code>" + escapeHtml(body.digest.slice(0, 12)) + "</code>" +
          (warnings.length ? ", " + warnings.length + " warning(s)" : "") + ".</div>";
      } else {
        bar.classList.add("bg-danger");
        bar.textContent = "refused";
        showErrors(body.errors);
      }
    };
    xhr.onerror = function () {
      button.disabled = false;
      showErrors([{message: "The upload did not reach the server; check the connection and try again."}]);
    };
    xhr.send(data);
  });
})();
