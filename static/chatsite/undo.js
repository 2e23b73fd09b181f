// Delete with a moment to change one's mind: a form with data-undo-seconds is not sent at once.
// A toast (role=status) says it is being deleted, with an Undo button, for that many seconds;
// then the form is sent as it would have been (the server deletes it, stopping its reply, and
// redirects). Leaving the page meanwhile sends it on the way out (sendBeacon), so a deletion
// the person did not undo always happens. Without JavaScript the form is sent at once.
(function () {
  "use strict";

  var pending = null; // { form, timer, toast }

  function toastFor(form, seconds) {
    var toast = document.createElement("div");
    toast.className = "toast";
    toast.id = "undo-toast";
    toast.setAttribute("role", "status");
    var text = document.createElement("span");
    text.textContent = interpolate(
      ngettext(
        "Deleting this conversation in %s second.",
        "Deleting this conversation in %s seconds.",
        seconds
      ),
      [seconds]
    );
    var undo = document.createElement("button");
    undo.type = "button";
    undo.className = "undo";
    undo.textContent = gettext("Undo");
    undo.addEventListener("click", cancel);
    toast.append(text, " ", undo);
    document.body.append(toast);
    undo.focus(); // the menu that held Delete is closed: Undo is where the keyboard is
    return toast;
  }

  function cancel() {
    if (!pending) return;
    clearTimeout(pending.timer);
    pending.toast.remove();
    var menu = pending.form.closest("details");
    if (menu) {
      menu.open = false;
      menu.querySelector("summary").focus();
    }
    pending = null;
  }

  function send() {
    var form = pending.form;
    pending.toast.querySelector("span").textContent = gettext("Deleting…");
    pending.toast.querySelector("button").remove();
    pending = null;
    form.submit(); // not requestSubmit: this handler is not asked again
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var seconds = Number(form.dataset && form.dataset.undoSeconds);
    if (!seconds || event.defaultPrevented) return;
    event.preventDefault();
    if (pending) return;
    var menu = form.closest("details");
    if (menu) menu.open = false;
    var toast = toastFor(form, seconds);
    pending = { form: form, toast: toast, timer: setTimeout(send, seconds * 1000) };
  });

  window.addEventListener("pagehide", function () {
    if (!pending) return;
    clearTimeout(pending.timer);
    navigator.sendBeacon(pending.form.action, new FormData(pending.form));
    pending = null;
  });
})();
