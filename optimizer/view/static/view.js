// promptloop view: small conveniences over pages that work without script.
(function () {
  "use strict";
  // filter selects submit their form as soon as they change
  document.querySelectorAll("select[data-autosubmit]").forEach(function (sel) {
    sel.addEventListener("change", function () { sel.form.submit(); });
  });

  // runs list: narrow rows while typing; pick a base (A) and a candidate (B) to compare
  var table = document.getElementById("runs-table");
  if (!table) { document.body.setAttribute("data-ready", "true"); return; }
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
  document.body.setAttribute("data-ready", "true");
})();
