// The sidebar's search, beyond what htmx does (templates/conversations/_search_form.html):
// - a result leads to its message (#msg-<id>): once the page is ready it is scrolled into view,
//   after chat.js has taken the list to its end (this script runs after it), without moving
//   the document; CSS marks it;
// - Escape in the search box clears it, which brings the conversations back, and does not stop
//   the reply being written (page.js's Escape), as it would anywhere else.
(function () {
  "use strict";

  // Only the message list scrolls, to centre the result: scrollIntoView (and the browser's jump
  // to a #fragment) scroll every ancestor too, the document included, which takes the top bar
  // off the screen.
  function showTarget() {
    var match = /^#msg-(\d+)$/.exec(window.location.hash);
    var target = match && document.getElementById("msg-" + match[1]);
    var list = target && target.closest("#messages");
    if (!list) return;
    for (var outer = list.parentElement; outer; outer = outer.parentElement) outer.scrollTop = 0;
    var offset = target.getBoundingClientRect().top - list.getBoundingClientRect().top;
    list.scrollTop += offset - Math.max(0, (list.clientHeight - target.offsetHeight) / 2);
  }

  document.addEventListener("DOMContentLoaded", showTarget);
  window.addEventListener("hashchange", showTarget);

  // Capturing, so that it runs before page.js's handler on the document.
  document.addEventListener("keydown", function (event) {
    var box = event.target;
    if (event.key !== "Escape" || box.id !== "search-box" || !box.value) return;
    event.preventDefault();
    box.value = "";
    box.dispatchEvent(new Event("input", { bubbles: true }));
  }, true);
})();
