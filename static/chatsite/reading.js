// Reading a long conversation on the chat page:
// - a long message of yours is folded to a few lines (CSS clamps it), with a "Show more"
//   button (aria-expanded) that unfolds it and folds it again;
// - while a reply is being written and the reader has scrolled up, a "Jump to latest" button
//   takes the list to its end (where chat.js then follows the reply again).
(function () {
  "use strict";

  // A message of more lines than this is folded to FOLDED_LINES (chat.css clamps it).
  var FOLD_LINES = 14;
  var NEAR_BOTTOM_PX = 48; // as chat.js's "at the bottom"

  function fold(root) {
    root.querySelectorAll(".message.user .user-text:not([data-fold])").forEach(function (text) {
      var article = text.closest(".message");
      var line = parseFloat(getComputedStyle(text).lineHeight) || 24;
      if (text.scrollHeight <= FOLD_LINES * line) {
        text.dataset.fold = "short";
        return;
      }
      text.dataset.fold = "folded";
      text.id = text.id || article.id + "-text";
      var button = document.createElement("button");
      button.type = "button";
      button.className = "show-more";
      button.setAttribute("aria-controls", text.id);
      button.setAttribute("aria-expanded", "false");
      button.textContent = gettext("Show more");
      text.after(button);
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button.show-more");
    if (!button) return;
    var text = document.getElementById(button.getAttribute("aria-controls"));
    var open = button.getAttribute("aria-expanded") !== "true";
    text.dataset.fold = open ? "open" : "folded";
    button.setAttribute("aria-expanded", open ? "true" : "false");
    button.textContent = open ? gettext("Show less") : gettext("Show more");
  });

  function setupJump(chat) {
    var messages = document.getElementById("messages");
    if (!messages) return;
    var button = document.createElement("button");
    button.type = "button";
    button.id = "jump-to-latest";
    button.className = "jump-latest";
    button.hidden = true;
    button.textContent = gettext("Jump to latest");
    messages.after(button);

    function update() {
      var below = messages.scrollHeight - messages.scrollTop - messages.clientHeight;
      var away = below > NEAR_BOTTOM_PX;
      button.hidden = !(away && messages.getAttribute("aria-busy") === "true");
    }
    button.addEventListener("click", function () {
      messages.scrollTop = messages.scrollHeight;
      button.hidden = true;
      var box = document.querySelector("#send-form textarea");
      if (box) box.focus(); // the button is gone: the keyboard goes back to the composer
    });
    messages.addEventListener("scroll", update, { passive: true });
    chat.addEventListener("htmx:wsAfterMessage", update);
  }

  document.addEventListener("DOMContentLoaded", function () {
    fold(document);
    var chat = document.querySelector("section.chat[ws-connect]");
    if (!chat) return;
    setupJump(chat);
    chat.addEventListener("htmx:wsAfterMessage", function () { fold(chat); });
  });
})();
