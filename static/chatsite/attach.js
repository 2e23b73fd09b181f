// The composer's attachments: files come from the Attach button, a drop on the composer or a
// paste into the message box; each is posted on its own, and the server answers with its chip
// (name, kind, size, tokens) or says in words why it was refused. A chip's hidden field sends
// the file with the next message; once that message is on the page (in any tab) the chip goes.
(function () {
  "use strict";

  function setup(form) {
    var button = document.getElementById("attach-button");
    var input = document.getElementById("attach-input");
    var list = document.getElementById("composer-attachments");
    var textarea = form.querySelector("textarea");
    var picker = form.querySelector(".model-picker");
    var notice = document.getElementById("composer-limit");
    if (!button || !input || !list) return;
    var maxBytes = Number(button.dataset.maxBytes) || 0;
    // The page's language, not the browser's: the numbers read like the words around them.
    var format = new Intl.NumberFormat(document.documentElement.lang || undefined);

    function say(text) {
      if (!notice) return;
      notice.textContent = text;
      notice.hidden = !text;
    }
    // A message of files alone may be sent without text.
    function update() {
      textarea.required = !list.querySelector(".attachment-chip");
    }

    function upload(file) {
      var chip = document.createElement("li");
      chip.className = "attachment-chip uploading";
      chip.textContent = interpolate(gettext("%s · reading…"), [file.name]);
      list.appendChild(chip);
      if (maxBytes && file.size > maxBytes) {
        chip.remove();
        say(interpolate(gettext("%(name)s is %(size)s bytes; attachments are limited to %(limit)s bytes."),
          { name: file.name, size: format.format(file.size), limit: format.format(maxBytes) }, true));
        return;
      }
      var body = new FormData();
      body.append("file", file, file.name);
      if (picker) body.append("model", picker.value);
      fetch(button.dataset.upload, {
        method: "POST",
        body: body,
        headers: { "X-CSRFToken": button.dataset.csrf },
        credentials: "same-origin",
      }).then(function (response) {
        return response.text().then(function (text) {
          // 201 is a chip; a redirect is the login page (the session ended): not a chip.
          if (response.redirected) throw new Error(gettext("You were signed out. Sign in again to attach files."));
          if (response.status !== 201) throw new Error(text || gettext("The file could not be attached."));
          chip.outerHTML = text;
          say("");
        });
      }).catch(function (error) {
        chip.remove();
        say(interpolate(gettext("Not attached: %s"), [error.message.trim()]));
      }).finally(update);
    }

    function uploadAll(files) {
      Array.prototype.forEach.call(files || [], upload);
    }

    button.addEventListener("click", function () { input.click(); });
    input.addEventListener("change", function () {
      uploadAll(input.files);
      input.value = "";
    });
    var composer = form.closest(".composer") || form;
    composer.addEventListener("dragover", function (event) {
      if (!event.dataTransfer || Array.prototype.indexOf.call(event.dataTransfer.types, "Files") < 0) return;
      event.preventDefault();
      composer.classList.add("dropping");
    });
    composer.addEventListener("dragleave", function () { composer.classList.remove("dropping"); });
    composer.addEventListener("drop", function (event) {
      composer.classList.remove("dropping");
      if (!event.dataTransfer || !event.dataTransfer.files.length) return;
      event.preventDefault();
      uploadAll(event.dataTransfer.files);
    });
    textarea.addEventListener("paste", function (event) {
      var files = event.clipboardData && event.clipboardData.files;
      if (!files || !files.length) return;
      event.preventDefault(); // a pasted file is attached, not pasted as its name
      uploadAll(files);
    });

    list.addEventListener("click", function (event) {
      var remove = event.target.closest && event.target.closest(".attachment-remove");
      if (!remove) return;
      var chip = remove.closest(".attachment-chip");
      fetch(remove.dataset.remove, {
        method: "POST",
        headers: { "X-CSRFToken": button.dataset.csrf },
        credentials: "same-origin",
      }).then(function (response) {
        // 404: already sent or taken out elsewhere; either way it is not in this composer.
        if (!response.redirected && (response.status === 204 || response.status === 404)) chip.remove();
        else say(gettext("The file could not be taken out. Reload the page and try again."));
        update();
        textarea.focus();
      });
    });

    // Not while a file is still being read: the message would leave without it.
    form.addEventListener("htmx:wsConfigSend", function (event) {
      if (!list.querySelector(".attachment-chip.uploading")) return;
      event.preventDefault();
      say(gettext("Wait until the files are read, then send."));
    });
    // Sent: the message on the page lists the file, and the composer lets go of its chip.
    var chat = form.closest("section.chat");
    if (chat) chat.addEventListener("htmx:wsAfterMessage", function () {
      list.querySelectorAll(".attachment-chip[data-attachment]").forEach(function (chip) {
        var id = chip.dataset.attachment;
        if (chat.querySelector('#messages a[data-attachment="' + id + '"]')) chip.remove();
      });
      update();
    });
    update();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("send-form");
    if (form) setup(form);
  });
})();
