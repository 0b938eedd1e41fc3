// The console's only script: it reloads the chart as the sampler adds to
// it, and keeps a form from being sent twice by a double click.
"use strict";
(function () {
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
