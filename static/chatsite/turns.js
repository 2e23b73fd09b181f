// Another go at a turn, from the page: Regenerate (Retry after a failure) and Continue on the
// last reply, Edit on a message of yours, and ‹ › between the versions of a turn. Each is a
// frame on the conversation's socket; the server starts the reply (or switches the branch) and
// every tab of the conversation, in any process, shows the same thing.
(function () {
  "use strict";

  var socket = null; // htmx's socket wrapper: it queues frames while the connection is down
  // Choosing a version re-renders the list: focus goes back to the same control on the version
  // now shown, not to the top of the page.
  var refocus = null;

  function newKey() {
    return window.crypto && crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2);
  }

  function send(frame) {
    if (!socket) return;
    var picker = document.querySelector("#send-form select[name=model]");
    if (picker && frame.action !== "select") frame.model = picker.value;
    socket.send(JSON.stringify(frame), null);
  }

  function focusComposer() {
    var box = document.querySelector("#send-form textarea");
    if (box) box.focus();
  }

  function startEditing(article, messageId) {
    if (article.querySelector("form.edit-message")) return;
    var body = article.querySelector(".body");
    var form = document.createElement("form");
    form.className = "edit-message";
    var label = document.createElement("label");
    label.className = "visually-hidden";
    label.textContent = gettext("Edit your message");
    var box = document.createElement("textarea");
    box.value = body ? body.textContent : "";
    box.rows = Math.min(12, Math.max(2, box.value.split("\n").length));
    label.appendChild(box);
    var save = document.createElement("button");
    save.type = "submit";
    save.className = "primary";
    save.textContent = gettext("Save and send");
    var cancel = document.createElement("button");
    cancel.type = "button";
    cancel.textContent = gettext("Cancel");
    form.append(label, save, cancel);
    if (body) body.hidden = true;
    article.insertBefore(form, article.querySelector(".message-meta"));
    box.focus();
    function close() {
      form.remove();
      if (body) body.hidden = false;
    }
    cancel.addEventListener("click", function () {
      close();
      var edit = article.querySelector("[data-edit]");
      if (edit) edit.focus();
    });
    form.addEventListener("keydown", function (event) {
      if (event.key === "Escape") {
        event.stopPropagation(); // Escape here cancels the edit, not the running reply
        cancel.click();
      }
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var text = box.value.trim();
      if (!text) return;
      send({ action: "edit", message_id: messageId, content: text, idempotency_key: newKey() });
      close();
      focusComposer();
    });
  }

  // A new branch (an edit, a regenerate) starts after the message named by its marker: what
  // the page showed after that message is another branch now.
  function applyBranchStarts(messages) {
    messages.querySelectorAll(":scope > template.branch-start").forEach(function (marker) {
      var after = marker.dataset.after;
      var anchor = after ? document.getElementById("msg-" + after) : null;
      if (after && !anchor) {
        window.location.reload(); // this page showed another branch: take the server's
        return;
      }
      var node = marker.previousElementSibling;
      while (node && node !== anchor) {
        var previous = node.previousElementSibling;
        node.remove();
        node = previous;
      }
      marker.remove();
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var chat = document.querySelector("section.chat[ws-connect]");
    var messages = document.getElementById("messages");
    if (!chat || !messages) return;
    chat.addEventListener("htmx:wsOpen", function (event) {
      socket = event.detail.socketWrapper;
    });
    chat.addEventListener("htmx:wsAfterMessage", function () {
      applyBranchStarts(messages);
      if (!refocus) return;
      var shown = document.getElementById("msg-" + refocus.id);
      if (!shown) return; // not this message's re-render yet
      var buttons = shown.querySelectorAll(".versions button");
      var same = shown.querySelector('.versions button[aria-label="' + refocus.label + '"]');
      var target = same && !same.disabled ? same : Array.prototype.find.call(buttons, function (b) {
        return !b.disabled;
      });
      if (target) target.focus();
      refocus = null;
    });
    messages.addEventListener("click", function (event) {
      var button = event.target.closest("button");
      if (!button || button.disabled) return;
      var article = button.closest("article.message");
      if (button.dataset.select) {
        refocus = { id: button.dataset.select, label: button.getAttribute("aria-label") };
        send({ action: "select", message_id: Number(button.dataset.select) });
      } else if (button.dataset.turn) {
        send({ action: button.dataset.turn, idempotency_key: newKey() });
        focusComposer();
      } else if (button.dataset.edit && article) {
        startEditing(article, Number(button.dataset.edit));
      }
    });
  });
})();
