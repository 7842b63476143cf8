// mindstore console: reload a page that says it is not ready yet (an element with
// data-refresh, in milliseconds), such as the charts while they are first computed.
"use strict";
(function () {
  const waiting = document.querySelector("[data-refresh]");
  if (!waiting) return;
  const every = Math.max(Number(waiting.dataset.refresh) || 2000, 500);
  window.setTimeout(function () { window.location.reload(); }, every);
})();
