// Live parts of a page: an element with data-live="<url>" is replaced by each Server-Sent
// Event from that url. Event "done": the job ended, reload for the final state.
// Event "signed-out": the session ended, reload to reach the sign-in page.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("[data-live]").forEach(function (element) {
    var source = new EventSource(element.dataset.live);
    source.onmessage = function (event) {
      element.innerHTML = event.data;
    };
    ["done", "signed-out"].forEach(function (name) {
      source.addEventListener(name, function () {
        source.close();
        window.location.reload();
      });
    });
    window.addEventListener("pagehide", function () { source.close(); });
  });
});
