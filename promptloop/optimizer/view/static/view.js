// promptloop view: small conveniences over pages that work without script.
(function () {
  "use strict";
  // filter selects submit their form as soon as they change
  document.querySelectorAll("select[data-autosubmit]").forEach(function (sel) {
    sel.addEventListener("change", function () { sel.form.submit(); });
  });

  // runs list: narrow rows while typing; pick a base (A) and a candidate (B) to compare
  function runsList(table) {
    var rows = Array.prototype.slice.call(table.querySelectorAll("tbody tr"));
    var search = document.getElementById("run-search");
    var count = document.getElementById("run-count");
    var button = document.getElementById("compare-button");
    var hint = document.getElementById("compare-hint");
    function narrow() {
      var q = search.value.trim().toLowerCase(), n = 0;
      rows.forEach(function (r) {
        var show = !q || r.dataset.search.indexOf(q) >= 0;
        r.hidden = !show;
        if (show) { n += 1; }
      });
      count.textContent = "showing " + n + " of " + rows.length + " runs";
    }
    function picked(name) {
      var el = table.querySelector("input[name=" + name + "]:checked");
      return el ? el.closest("tr") : null;
    }
    function pick() {
      var a = picked("base"), b = picked("cand");
      rows.forEach(function (r) {
        r.classList.toggle("picked-base", r === a);
        r.classList.toggle("picked-cand", r === b);
      });
      var ok = a && b && a !== b && a.dataset.suite === b.dataset.suite;
      button.disabled = !ok;
      if (!a || !b) { hint.textContent = "choose A (base) and B (candidate)"; }
      else if (a === b) { hint.textContent = "A and B must be two different runs"; }
      else if (!ok) { hint.textContent = "A and B must be runs of the same suite"; }
      else { hint.textContent = "compare " + a.dataset.suite + " runs"; }
    }
    search.addEventListener("input", narrow);
    table.addEventListener("change", pick);
    narrow();
    pick();
  }

  // labeling page: the labels file (JSONL, the format `promptloop calibrate --labels` reads,
  // see optimizer/lifecycle/labels.py) is built here and downloaded; nothing is sent anywhere
  function labeling(dataEl) {
    var data = JSON.parse(dataEl.textContent);
    var out = document.getElementById("labels-output");
    var link = document.getElementById("labels-download");
    var count = document.getElementById("label-count");
    var labeler = document.getElementById("labeler");
    var url = null;
    function line(section) {
      var scores = {}, any = false;
      section.querySelectorAll("select.grade").forEach(function (sel) {
        if (sel.value === "") { return; }
        scores[sel.dataset.dim] = sel.value === "unknown" ? "unknown" : Number(sel.value);
        any = true;
      });
      if (!any) { return null; }
      var item = {trial_id: section.dataset.trialId, grader: data.grader, scores: scores};
      var who = labeler.value.trim(), note = section.querySelector("input.note").value.trim();
      if (who) { item.labeler = who; }
      if (note) { item.note = note; }
      return JSON.stringify(item);
    }
    function build() {
      var lines = [];
      document.querySelectorAll("section.label-trial").forEach(function (s) {
        var l = line(s);
        if (l !== null) { lines.push(l); }
      });
      var text = lines.length ? lines.join("\n") + "\n" : "";
      out.value = text;
      count.textContent = lines.length + " trial(s) labelled";
      if (url) { URL.revokeObjectURL(url); }
      url = URL.createObjectURL(new Blob([text], {type: "application/x-ndjson"}));
      link.href = url;
      link.setAttribute("aria-disabled", lines.length ? "false" : "true");
    }
    document.getElementById("label-trials").addEventListener("change", build);
    document.getElementById("label-trials").addEventListener("input", build);
    labeler.addEventListener("input", build);
    build();
  }

  var table = document.getElementById("runs-table");
  if (table) { runsList(table); }
  var labels = document.getElementById("label-data");
  if (labels) { labeling(labels); }
  document.body.setAttribute("data-ready", "true");
})();
