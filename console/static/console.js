// The console's only script: it reloads the chart as the sampler adds to
// it, and keeps a form from being sent twice by a double click. It marks
// the page (data-js="on") so that a test can tell it ran under the CSP.
"use strict";
(function () {
  document.documentElement.dataset.js = "on";
  var chart = document.getElementById("chart");
  if (chart) {
    setInterval(function () {
      chart.src = "/ui/chart.svg?t=" + Date.now();
    }, 10000);
  }
  document.querySelectorAll("form").forEach(function (form) {
    form.addEventListener("submit", function (ev) {
      if (form.dataset.sent) {
        ev.preventDefault();
        return;
      }
      form.dataset.sent = "1";
    });
  });
})();
