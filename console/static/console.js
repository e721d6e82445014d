// Live parts of a page: an element with data-live="<url>" follows the Server-Sent Events
// of that url. Each message is HTML: it replaces the element's content, or, when the
// element also has data-parts (the job page), each top-level element of the message
// replaces the page's element of the same id (the server renders them with the page's own
// partials). Event "done": the job ended, reload for the final state.
// Event "signed-out": the session ended, reload to reach the sign-in page.
// Copy buttons: a button with data-copy="<input id>" copies that input's value (a job's
// whole id, an output hash). Hidden without script: the read-only input can still be
// selected by hand.
"use strict";
function swapParts(html) {
  var parsed = document.createElement("template");
  parsed.innerHTML = html;
  Array.prototype.forEach.call(parsed.content.children, function (part) {
    var old = part.id && document.getElementById(part.id);
    if (old) { old.replaceWith(part.cloneNode(true)); }
  });
}
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("[data-live]").forEach(function (element) {
    var source = new EventSource(element.dataset.live);
    var parts = element.hasAttribute("data-parts");
    source.onmessage = function (event) {
      if (parts) {
        swapParts(event.data);
      } else {
        element.innerHTML = event.data;
      }
    };
    ["done", "signed-out"].forEach(function (name) {
      source.addEventListener(name, function () {
        source.close();
        window.location.reload();
      });
    });
    window.addEventListener("pagehide", function () { source.close(); });
  });
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var input = document.getElementById(button.dataset.copy);
    var done = document.getElementById(button.id + "-done");
    if (!input) { return; }
    button.hidden = false;
    button.addEventListener("click", function () {
      input.select();
      var say = function (text) { if (done) { done.textContent = text; } };
      // The clipboard API needs a secure context (https or localhost); elsewhere the older
      // command copies the selection.
      var fallback = function () {
        say(document.execCommand("copy") ? "Copied." : "Selected: press Ctrl+C to copy.");
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(input.value).then(function () { say("Copied."); }, fallback);
      } else {
        fallback();
      }
    });
  });
});
