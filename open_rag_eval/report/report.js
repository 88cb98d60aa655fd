// Sort and filter the queries table; open a query's drill-down from the table; say when a table scrolls sideways.
// No network, no dependencies.
(function () {
  "use strict";
  // a hint above a table box wider than the screen: shown while the box scrolls (a phone), hidden when it fits
  var hints = document.querySelectorAll(".scroll-hint");
  function showHints() {
    Array.prototype.forEach.call(hints, function (hint) {
      var box = hint.nextElementSibling;
      hint.hidden = !box || box.scrollWidth <= box.clientWidth + 1;
    });
  }
  showHints();
  window.addEventListener("resize", showHints);
  document.addEventListener("toggle", showHints, true);
}());
(function () {
  "use strict";
  var table = document.getElementById("queries");
  if (!table) { return; }
  var body = table.tBodies[0];
  var rows = Array.prototype.slice.call(body.rows);

  function value(row, key) {
    var cell = row.querySelector('[data-key="' + key + '"]');
    if (!cell) { return null; }
    var v = cell.getAttribute("data-v");
    if (v === null || v === "") { return null; }
    var n = Number(v);
    return isNaN(n) ? v.toLowerCase() : n;
  }

  function sortBy(key, ascending) {
    rows.sort(function (a, b) {
      var x = value(a, key), y = value(b, key);
      if (x === null && y === null) { return 0; }
      if (x === null) { return 1; }  // missing values last, whichever the direction
      if (y === null) { return -1; }
      if (x < y) { return ascending ? -1 : 1; }
      if (x > y) { return ascending ? 1 : -1; }
      return 0;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }

  Array.prototype.forEach.call(table.tHead.querySelectorAll("th[data-sort]"), function (th) {
    th.addEventListener("click", function () {
      var ascending = th.getAttribute("data-dir") !== "asc";
      th.setAttribute("data-dir", ascending ? "asc" : "desc");
      sortBy(th.getAttribute("data-sort"), ascending);
    });
  });

  var filter = document.getElementById("filter");
  var onlyFailed = document.getElementById("only-failed");
  function applyFilter() {
    var text = (filter.value || "").toLowerCase();
    var shown = 0;
    rows.forEach(function (row) {
      var ok = row.textContent.toLowerCase().indexOf(text) !== -1;
      if (onlyFailed.checked) { ok = ok && row.getAttribute("data-failed") !== "0"; }
      row.style.display = ok ? "" : "none";
      if (ok) { shown += 1; }
    });
    document.getElementById("shown").textContent = String(shown);
  }
  filter.addEventListener("input", applyFilter);
  onlyFailed.addEventListener("change", applyFilter);

  var worst = document.getElementById("worst");
  worst.addEventListener("change", function () {
    var option = worst.options[worst.selectedIndex];
    if (!option.value) { return; }
    sortBy(option.value, option.getAttribute("data-lower-better") !== "1");
  });

  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a.open") : null;
    if (!link) { return; }
    var target = document.getElementById(link.getAttribute("href").slice(1));
    if (target) { target.open = true; }
  });
  if (location.hash) {
    var opened = document.getElementById(location.hash.slice(1));
    if (opened && opened.tagName === "DETAILS") { opened.open = true; }
  }
  applyFilter();
}());
