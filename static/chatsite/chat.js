// Composer behaviour: Enter sends, Shift+Enter is a newline, and every message carries a fresh
// idempotency key so a retried or double-clicked send never starts two replies.
(function () {
  function newKey() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, function (b) { return b.toString(16).padStart(2, "0"); }).join("");
  }

  function renewKey(form) {
    var field = form.querySelector('input[name="idempotency_key"]');
    if (field) field.value = newKey();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("send-form");
    if (!form) return;
    renewKey(form);
    var textarea = form.querySelector("textarea");
    textarea.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    document.body.addEventListener("htmx:wsAfterSend", function (event) {
      if (event.target !== form && !form.contains(event.target)) return;
      textarea.value = "";
      renewKey(form);
    });
  });
})();
