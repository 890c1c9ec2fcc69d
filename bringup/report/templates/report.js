// bringup scorecard: sortable tables and table filters. No dependencies, no network.
(function () {
  "use strict";

  function cellKey(row, idx) {
    var cell = row.cells[idx];
    if (!cell) { return ""; }
    var v = cell.getAttribute("data-v");
    return v === null ? cell.textContent.trim() : v;
  }

  function compare(a, b) {
    var na = parseFloat(a), nb = parseFloat(b);
    var aNum = a !== "" && isFinite(a) && !isNaN(na), bNum = b !== "" && isFinite(b) && !isNaN(nb);
    if (aNum && bNum) { return na - nb; }
    if (aNum !== bNum) { return aNum ? -1 : 1; }  // numbers before text
    return a.localeCompare(b);
  }

  function makeSortable(table) {
    var heads = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(heads, function (th, idx) {
      th.setAttribute("tabindex", "0");
      function sort() {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r1, r2) {
          var a = cellKey(r1, idx), b = cellKey(r2, idx);
          if (a === "" || b === "") { return (a === "") - (b === ""); }  // missing values last, both ways
          var c = compare(a, b);
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { sort(); } });
    });
  }

  function applyFilter(form) {
    var table = document.getElementById(form.getAttribute("data-table"));
    if (!table) { return; }
    var status = form.querySelector("select[name=status]");
    var text = form.querySelector("input[type=search]");
    var checks = form.querySelectorAll("input[type=checkbox]");
    var want = status ? status.value : "";
    var needle = text ? text.value.trim().toLowerCase() : "";
    var rows = table.tBodies[0].rows, shown = 0;
    Array.prototype.forEach.call(rows, function (row) {
      var ok = !want || row.getAttribute("data-status") === want;
      if (ok && needle) { ok = row.textContent.toLowerCase().indexOf(needle) >= 0; }
      Array.prototype.forEach.call(checks, function (cb) {
        if (ok && cb.checked) { ok = row.getAttribute("data-" + cb.name) === "1"; }
      });
      row.hidden = !ok;
      if (ok) { shown += 1; }
    });
    var out = form.querySelector(".shown");
    if (out) { out.textContent = "showing " + shown + " of " + rows.length; }
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), makeSortable);
    Array.prototype.forEach.call(document.querySelectorAll("form.filters"), function (form) {
      form.addEventListener("input", function () { applyFilter(form); });
      form.addEventListener("change", function () { applyFilter(form); });
      form.addEventListener("submit", function (ev) { ev.preventDefault(); });
      applyFilter(form);
    });
    document.documentElement.setAttribute("data-ready", "1");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
