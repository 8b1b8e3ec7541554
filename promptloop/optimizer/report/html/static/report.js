(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var table = document.getElementById("trial-table");
  var groups = Array.prototype.slice.call(table.querySelectorAll("tbody.trial"));
  var bucketSel = document.getElementById("f-bucket");
  var statusBox = document.getElementById("f-status");
  var search = document.getElementById("f-search");
  var changed = document.getElementById("f-changed");
  var countEl = document.getElementById("f-count");
  function tally(key, value) {
    return data.trials.filter(function (t) { return t[key] === value; }).length;
  }
  data.buckets.forEach(function (b) {
    var o = document.createElement("option");
    o.value = b;
    o.textContent = b + " (" + tally("bucket", b) + ")";
    bucketSel.appendChild(o);
  });
  data.statuses.forEach(function (s) {
    var label = document.createElement("label");
    var box = document.createElement("input");
    box.type = "checkbox"; box.value = s; box.checked = true;
    label.appendChild(box);
    label.appendChild(document.createTextNode(" " + s + " (" + tally("status", s) + ")"));
    statusBox.appendChild(label);
  });
  function statusOn() {
    var on = {};
    statusBox.querySelectorAll("input").forEach(function (c) { on[c.value] = c.checked; });
    return on;
  }
  function apply() {
    var b = bucketSel.value, q = search.value.trim().toLowerCase(), on = statusOn(), n = 0;
    groups.forEach(function (g) {
      var show = (!b || g.dataset.bucket === b) && on[g.dataset.status] !== false &&
        (!q || g.dataset.task.toLowerCase().indexOf(q) >= 0) &&
        (!changed || !changed.checked || g.dataset.changed === "1");
      g.hidden = !show;
      if (show) { n += 1; }
    });
    countEl.textContent = "showing " + n + " of " + groups.length + " trials";
  }
  function toggle(g, open) {
    var d = g.querySelector("tr.detail"), btn = g.querySelector("button.exp");
    if (open === undefined) { open = d.hidden; }
    d.hidden = !open;
    g.classList.toggle("open", open);
    btn.setAttribute("aria-expanded", open ? "true" : "false");
    btn.textContent = open ? "\u25BE" : "\u25B8";
  }
  table.addEventListener("click", function (e) {
    var row = e.target.closest("tr.head");
    if (row && !e.target.closest("a")) { toggle(row.parentNode); }
  });
  var sortKey = "order", sortDir = 1;
  table.querySelectorAll("th[data-sort]").forEach(function (th) {
    th.addEventListener("click", function () {
      var key = th.dataset.sort;
      sortDir = key === sortKey ? -sortDir : 1;
      sortKey = key;
      table.querySelectorAll("th").forEach(function (h) {
        h.classList.remove("sorted-asc", "sorted-desc");
      });
      th.classList.add(sortDir > 0 ? "sorted-asc" : "sorted-desc");
      var numeric = ["index", "score", "tokens", "secs"].indexOf(key) >= 0;
      groups.sort(function (a, b) {
        var x = a.dataset[key], y = b.dataset[key], r;
        r = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
        return r * sortDir || parseFloat(a.dataset.order) - parseFloat(b.dataset.order);
      });
      groups.forEach(function (g) { table.appendChild(g); });
    });
  });
  bucketSel.addEventListener("change", apply);
  statusBox.addEventListener("change", apply);
  search.addEventListener("input", apply);
  if (changed) { changed.addEventListener("change", apply); }
  document.getElementById("b-failures").addEventListener("click", function () {
    statusBox.querySelectorAll("input").forEach(function (c) {
      c.checked = c.value === "failed" || c.value === "timedOut";
    });
    apply();
  });
  document.getElementById("b-reset").addEventListener("click", function () {
    bucketSel.value = ""; search.value = "";
    if (changed) { changed.checked = false; }
    statusBox.querySelectorAll("input").forEach(function (c) { c.checked = true; });
    apply();
  });
  document.getElementById("b-expand").addEventListener("click", function () {
    groups.forEach(function (g) { if (!g.hidden) { toggle(g, true); } });
  });
  document.getElementById("b-collapse").addEventListener("click", function () {
    groups.forEach(function (g) { toggle(g, false); });
  });
  document.querySelectorAll("[data-show-bucket]").forEach(function (a) {
    a.addEventListener("click", function () {
      bucketSel.value = a.dataset.showBucket;
      apply();
    });
  });
  document.querySelectorAll("input[name=metric]").forEach(function (r) {
    r.addEventListener("change", function () {
      document.querySelectorAll("div.chart[data-metric]").forEach(function (c) {
        c.hidden = c.dataset.metric !== r.value;
      });
    });
  });
  var m = /^#trial-(\d+)$/.exec(location.hash);
  if (m) {
    var g = document.getElementById("trial-" + m[1]);
    if (g) { toggle(g, true); g.scrollIntoView(); }
  }
  apply();
  document.body.setAttribute("data-ready", "true");
})();
