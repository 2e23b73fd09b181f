// A reply the server saved shorter than this page showed it: the process that wrote it died
// (kill -9, a crash) after the page received text it had not yet written to its row, which it
// does every few seconds. The page keeps the longer text it showed and says that the end of it
// was not saved, rather than take back text the reader has already seen.
//
// The page counts the characters of each reply it was sent: a reply's block being written
// carries the length of its text (data-chars, _writing.html; a snapshot the whole text's length
// too, data-total, as a long one comes in pieces) and every delta adds its
// own; the saved reply carries its text (its Copy button's raw Markdown). A snapshot of the
// saved text, shorter than what the page has, is not swapped in either.
(function () {
  "use strict";

  function chars(text) { return Array.from(text).length; }

  function shown(messageId) {
    var writing = document.getElementById("msg-" + messageId + "-writing");
    return writing && writing.dataset.chars ? Number(writing.dataset.chars) : null;
  }

  function keepShown(fragment, messageId, had) {
    var article = fragment.querySelector("article#msg-" + messageId);
    var raw = article && article.querySelector("template.raw-markdown");
    var body = article && article.querySelector("#msg-" + messageId + "-body");
    var old = document.getElementById("msg-" + messageId + "-body");
    if (!raw || !body || !old) return; // a message too long for a frame, loaded over HTTP
    var saved = chars(raw.content.textContent);
    if (saved >= had) return;
    body.replaceChildren.apply(body, Array.from(old.childNodes, function (node) {
      return node.cloneNode(true);
    }));
    body.classList.add("unsaved");
    var note = document.createElement("p");
    note.className = "marker unsaved";
    note.textContent = interpolate(
      ngettext(
        "Not saved: the last %s character shown here was lost when the server stopped. Copy it now if you need it.",
        "Not saved: the last %s characters shown here were lost when the server stopped. Copy them now if you need them.",
        had - saved
      ),
      [had - saved]
    );
    body.after(note);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var chat = document.querySelector("section.chat[ws-connect]");
    if (!chat) return;
    chat.addEventListener("htmx:oobBeforeSwap", function (event) {
      var target = event.detail.target;
      var fragment = event.detail.fragment;
      if (!target || !fragment) return;
      var writing = /^msg-(\d+)-writing$/.exec(target.id);
      if (writing && target.dataset.chars) {
        // A delta, appended to the block being written, or the block rendered again with the
        // length of the text so far (events/writing.html); neither when the page kept its own
        // text instead of a snapshot's (the rest of a long snapshot comes as deltas).
        if (target.closest("[data-kept]")) event.detail.shouldSwap = false;
        else if (fragment.dataset && fragment.dataset.chars) target.dataset.chars = fragment.dataset.chars;
        else target.dataset.chars = String(Number(target.dataset.chars) + chars(fragment.textContent));
        return;
      }
      var body = /^msg-(\d+)-body$/.exec(target.id);
      if (body && fragment.querySelector) {
        // The text so far, sent again: a live reply's is never shorter than what the page has,
        // the saved text of a reply whose process died can be. Then the page keeps its own.
        var had = shown(body[1]);
        var incoming = fragment.querySelector(".writing[data-chars]");
        var total = incoming && Number(incoming.dataset.total || incoming.dataset.chars);
        if (had !== null && incoming && total < had) {
          event.detail.shouldSwap = false;
          target.dataset.kept = "true";
        } else {
          delete target.dataset.kept;
        }
        return;
      }
      var message = /^msg-(\d+)$/.exec(target.id);
      if (!message || !fragment.querySelector) return;
      var before = shown(message[1]);
      if (before !== null) keepShown(fragment, message[1], before);
    });
  });
})();
