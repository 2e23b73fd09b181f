// The chat page's behaviour around htmx's WebSocket extension:
// - the composer: Enter sends, Shift+Enter is a newline, every message carries a fresh
//   idempotency key so a retried or double-clicked send never starts two replies, a send the
//   server refuses puts its text back, a message over the limit is refused before it is sent,
//   each conversation's draft is kept in localStorage until it is sent, and a message sent
//   while the socket is down, or lost with it before the server answered, is sent again once
//   it is back, with the same key;
// - the connection: the page shows when its socket is down (htmx reconnects after 1006), and
//   a reply being written says it is reconnecting, its Stop disabled;
// - catching up: a fragment for a message this page never saw start means the page missed
//   events while disconnected, so it reloads (keeping the draft) and the server resends the rest;
// - scrolling: the view follows a streaming reply while the reader is at the bottom.
(function () {
  "use strict";

  var RECONNECTING_CODES = [1006, 1011, 1012, 1013];
  var RELOAD_GUARD_MS = 5000;

  function newKey() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, function (b) { return b.toString(16).padStart(2, "0"); }).join("");
  }

  function setupComposer(chat, form) {
    var textarea = form.querySelector("textarea");
    var keyField = form.querySelector('input[name="idempotency_key"]');
    var errors = document.getElementById("chat-errors");
    var limit = setupLimit(textarea);
    var draftKey = "chatsite:draft:" + chat.dataset.conversation;
    var lastSent = null;

    function renewKey() { if (keyField) keyField.value = newKey(); }
    renewKey();

    // A conversation's draft lives in localStorage until it is sent, so a reload, another
    // conversation or a closed tab does not lose it.
    function saveDraft() {
      try {
        if (textarea.value) localStorage.setItem(draftKey, textarea.value);
        else localStorage.removeItem(draftKey);
      } catch (e) { /* storage full or blocked: the draft stays in the box only */ }
    }
    var draft = null;
    try { draft = localStorage.getItem(draftKey); } catch (e) { /* blocked */ }
    if (draft !== null && !textarea.value) textarea.value = draft;
    textarea.focus();

    // The box grows with its text up to the CSS max-height, then scrolls.
    function fit() {
      textarea.style.height = "auto";
      textarea.style.height = textarea.scrollHeight + 2 + "px";
    }
    function changed() { fit(); saveDraft(); limit.update(); }
    textarea.addEventListener("input", changed);
    fit();
    limit.update();

    textarea.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    // Over the limit: refused here, with the count, and the text stays in the box.
    form.addEventListener("htmx:wsConfigSend", function (event) {
      if (!limit.refuse()) return;
      event.preventDefault();
      textarea.focus();
    });
    function userMessages() { return chat.querySelectorAll("#messages .message.user").length; }
    // A message is held in the box, with its key, until the server has answered it: sent while
    // the socket is down, or lost with a socket that went down before the answer, it is sent
    // again once the socket is open (setupConnectionStatus runs first and marks it open). The
    // same idempotency key makes that exactly once: a send the server had already saved is
    // refused as a duplicate, and the page shows the message it saved.
    var held = false;
    var sentKey = null;
    function hold() {
      held = true;
      chat.dispatchEvent(new CustomEvent("chatsite:held"));
    }
    form.addEventListener("htmx:wsConfigSend", function (event) {
      if (event.defaultPrevented || chat.dataset.socket === "open") return;
      event.preventDefault(); // not htmx's queue: it forgets what a dying socket swallowed
      hold();
    });
    chat.addEventListener("htmx:wsOpen", function () {
      if (!held) return;
      held = false;
      form.requestSubmit();
    });
    chat.addEventListener("htmx:wsClose", function (event) {
      if (lastSent === null) return;
      // No answer came: the server may never have read it. Back in the box with its key.
      if (!textarea.value) {
        textarea.value = lastSent;
        if (keyField && sentKey) keyField.value = sentKey;
      }
      lastSent = null;
      changed();
      if (RECONNECTING_CODES.indexOf(event.detail.event.code) >= 0) hold();
    });
    var sentAt = 0;
    form.addEventListener("htmx:wsAfterSend", function () {
      lastSent = textarea.value;
      sentKey = keyField ? keyField.value : null;
      sentAt = userMessages();
      textarea.value = "";
      changed();
      if (errors) errors.replaceChildren();
      renewKey();
      textarea.focus();
    });
    chat.addEventListener("htmx:wsAfterMessage", function () {
      if (lastSent === null) return;
      var duplicate = errors && errors.querySelector(".error[data-code='duplicate']");
      if (userMessages() > sentAt || duplicate) {
        lastSent = null; // accepted: the message is on the page (or was, before a reconnect)
        if (duplicate) errors.replaceChildren();
      } else if (errors && errors.querySelector(".error")) {
        // Refused (a reply is still running, too many sends...): the text is not lost.
        if (!textarea.value) textarea.value = lastSent;
        changed();
        lastSent = null;
      }
    });

    // An example prompt of a new conversation fills the box; the person sends it.
    chat.addEventListener("click", function (event) {
      var example = event.target.closest && event.target.closest(".example-prompt");
      if (!example) return;
      textarea.value = example.textContent.trim();
      changed();
      textarea.focus();
    });
    // The empty state names the model that will answer: the one picked.
    var picker = form.querySelector(".model-picker");
    if (picker) picker.addEventListener("change", function () {
      var name = chat.querySelector(".empty-chat .model-answering");
      var option = picker.selectedOptions[0];
      if (name && option) name.textContent = option.textContent.trim();
    });
    return saveDraft;
  }

  // The server refuses a message over CHAT_MAX_PROMPT_CHARS (counted after trimming, in
  // characters); the page says so before sending, instead of cutting a paste short.
  function setupLimit(textarea) {
    var max = Number(textarea.dataset.maxChars) || 0;
    var count = document.getElementById("composer-count");
    var refusal = document.getElementById("composer-limit");
    var format = new Intl.NumberFormat(document.documentElement.lang || undefined);
    function length() { return Array.from(textarea.value.trim()).length; }
    function update() {
      var n = length();
      var over = max > 0 && n > max;
      if (count) {
        count.hidden = !(max > 0 && n > max * 0.8);
        count.textContent = interpolate(ngettext("%(n)s / %(max)s character", "%(n)s / %(max)s characters", max),
          { n: format.format(n), max: format.format(max) }, true);
        count.classList.toggle("over", over);
      }
      textarea.setAttribute("aria-invalid", over ? "true" : "false");
      if (!over && refusal) refusal.hidden = true;
    }
    function refuse() {
      var n = length();
      if (!(max > 0 && n > max)) return false;
      if (refusal) {
        refusal.textContent = interpolate(ngettext(
          "Not sent: this message has %(n)s characters, over the limit of %(max)s. Shorten it by %(over)s character; your text is kept.",
          "Not sent: this message has %(n)s characters, over the limit of %(max)s. Shorten it by %(over)s characters; your text is kept.",
          n - max), { n: format.format(n), max: format.format(max), over: format.format(n - max) }, true);
        refusal.hidden = false;
      }
      update();
      return true;
    }
    return { update: update, refuse: refuse };
  }

  // Stop gives the keyboard back to the composer, from the button or from Escape (keys.js).
  function setupStop(chat, form) {
    var textarea = form.querySelector("textarea");
    var stopForm = document.getElementById("stop-form");
    if (!stopForm) return;
    stopForm.addEventListener("htmx:wsAfterSend", function () { textarea.focus(); });
    // A reply stopped elsewhere replaces the Stop button this page had focused.
    var stopHadFocus = false;
    chat.addEventListener("htmx:wsBeforeMessage", function () {
      stopHadFocus = document.activeElement && document.activeElement.id === "stop-button";
    });
    chat.addEventListener("htmx:wsAfterMessage", function () {
      var stop = document.getElementById("stop-button");
      if (stopHadFocus && (document.activeElement !== stop || stop.disabled)) textarea.focus();
    });
  }

  function setupConnectionStatus(chat) {
    var status = document.getElementById("connection-status");
    var wasOpen = false;
    var LOST = gettext("Connection lost. Reconnecting…");
    function show(state, text) {
      chat.dataset.socket = state;
      if (!status) return;
      status.textContent = text || "";
      status.hidden = !text;
    }
    show("connecting", "");
    chat.addEventListener("htmx:wsConnecting", function () {
      show("connecting", waiting ? WAITING : wasOpen ? LOST : "");
    });
    // The composer holds a message sent while the socket is down (or lost with it) and sends
    // it once the socket is open again: say so, rather than let it leave later without a word.
    var waiting = false;
    var WAITING = gettext("Not connected. Your message will be sent when the connection is back.");
    chat.addEventListener("chatsite:held", function () {
      waiting = true;
      if (chat.dataset.socket === "closed") {
        show("closed", gettext("Disconnected, and your message was not sent. Reload the page and send it again."));
      } else {
        show(chat.dataset.socket, WAITING);
      }
    });
    chat.addEventListener("htmx:wsAfterSend", function () {
      if (waiting || chat.dataset.socket !== "open") return;
      show("open", ""); // the held message has left
    });
    chat.addEventListener("htmx:wsOpen", function () {
      wasOpen = true;
      showOutage(chat, false);
      show("open", waiting ? gettext("Connected again. Your message is being sent.") : "");
      waiting = false;
    });
    chat.addEventListener("htmx:wsClose", function (event) {
      var code = event.detail.event.code;
      if (RECONNECTING_CODES.indexOf(code) >= 0) {
        showOutage(chat, true);
        show("reconnecting", waiting ? WAITING : LOST);
      } else if (waiting) {
        show("closed", gettext("Disconnected, and your message was not sent. Reload the page and send it again."));
      } else if (code === 4403) {
        show("closed", gettext("This conversation is no longer available to you."));
      } else if (code === 4404) {
        show("closed", gettext("This conversation was deleted."));
        chat.querySelectorAll(".badge.streaming, .badge.waiting").forEach(function (badge) {
          badge.remove();
        });
      } else if (code === 4401) {
        show("closed", gettext("You were signed out. Sign in again to continue."));
      } else if (code === 4008) {
        show("closed", gettext("Too many messages at once. Reload the page to continue."));
      } else if (code === 4429) {
        show("closed", gettext("Too many open tabs. Close some, then reload this page."));
      } else {
        show("closed", gettext("Disconnected. Reload the page to continue."));
      }
    });
  }

  // While the socket is down nothing reaches this page, and a Stop would reach nobody: a reply
  // being written says it is reconnecting, and Stop waits for the socket. Once it is open they
  // are as they were, until the server's account of the reply (its text so far, or how it
  // ended) replaces them.
  function showOutage(chat, down) {
    chat.querySelectorAll(".message .badge.streaming, .message .badge.waiting").forEach(function (badge) {
      if (down && !badge.dataset.shown) {
        badge.dataset.shown = badge.textContent;
        badge.textContent = gettext("reconnecting…");
        badge.classList.add("reconnecting");
      } else if (!down && badge.dataset.shown) {
        badge.textContent = badge.dataset.shown;
        delete badge.dataset.shown;
        badge.classList.remove("reconnecting");
      }
    });
    var stop = document.getElementById("stop-button");
    if (!stop) return;
    if (down && !stop.disabled) {
      stop.disabled = true;
      stop.dataset.outage = "true";
      stop.title = gettext("Stop works again once the connection is back.");
    } else if (!down && stop.dataset.outage) {
      stop.disabled = false;
      delete stop.dataset.outage;
      stop.removeAttribute("title");
    }
  }

  function setupCatchUp(chat, saveDraft) {
    var guardKey = "chatsite:reloaded-at";
    // A fragment for a message id this page does not have: it missed that message's start.
    document.body.addEventListener("htmx:oobErrorNoTarget", function (event) {
      if (!/^#msg-\d+(-body|-writing)?$/.test(event.detail.target || "")) return;
      var last = Number(sessionStorage.getItem(guardKey) || 0);
      if (Date.now() - last < RELOAD_GUARD_MS) return; // never loop
      sessionStorage.setItem(guardKey, String(Date.now()));
      saveDraft();
      window.location.reload();
    });
    // A start this page already rendered (it loaded between the save and the event): skip it,
    // and its branch marker with it (turns.js), which would cut what it already shows. A whole
    // branch sent again (another version chosen) replaces the list as it is.
    chat.addEventListener("htmx:oobBeforeSwap", function (event) {
      var fragment = event.detail.fragment;
      if (event.detail.target.id !== "messages" || !fragment.querySelectorAll) return;
      if (fragment.querySelector("template.branch-all")) return;
      fragment.querySelectorAll("article[id^='msg-']").forEach(function (article) {
        if (!document.getElementById(article.id)) return;
        article.remove();
        var marker = fragment.querySelector("template.branch-start");
        if (marker) marker.remove();
      });
    });
  }

  // A reply rendered while pending keeps its "waiting" badge until text arrives; then it is
  // being written, and its status says so.
  function markWriting(chat) {
    chat.querySelectorAll(".message[data-status='pending']").forEach(function (message) {
      var body = message.querySelector(".body");
      if (!body || !body.textContent) return;
      message.dataset.status = "streaming";
      message.classList.replace("status-pending", "status-streaming");
      var badge = message.querySelector(".badge.waiting");
      if (badge) {
        badge.className = "badge streaming";
        badge.textContent = gettext("writing…");
      }
    });
  }

  function setupScrolling(chat) {
    var messages = document.getElementById("messages");
    if (!messages) return;
    var stick = true;
    function atBottom() {
      return messages.scrollHeight - messages.scrollTop - messages.clientHeight < 48;
    }
    messages.scrollTop = messages.scrollHeight;
    chat.addEventListener("htmx:wsBeforeMessage", function () { stick = atBottom(); });
    chat.addEventListener("htmx:wsAfterMessage", function () {
      markWriting(chat);
      // Screen readers announce the reply once it is finished, not every few characters.
      var stop = document.getElementById("stop-button");
      messages.setAttribute("aria-busy", stop && !stop.disabled ? "true" : "false");
      if (stick) messages.scrollTop = messages.scrollHeight;
    });
  }

  // Forms that need a second thought (Delete) say so in data-confirm; no inline handlers.
  document.addEventListener("submit", function (event) {
    var message = event.target.dataset && event.target.dataset.confirm;
    if (message && !window.confirm(message)) event.preventDefault();
  });

  // A new API token's key is selected when its box gets focus, ready to copy.
  document.addEventListener("focusin", function (event) {
    if (event.target.matches && event.target.matches("input[data-select-on-focus]")) {
      event.target.select();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    // The open conversation is visible in the sidebar, however far down the list it is.
    var open = document.querySelector("#conversation-list [aria-current=page]");
    if (open) open.scrollIntoView({ block: "nearest" });
    var chat = document.querySelector("section.chat[ws-connect]");
    var form = document.getElementById("send-form");
    if (!chat || !form) return;
    // First: the composer's handlers find the socket's state already updated.
    setupConnectionStatus(chat);
    var saveDraft = setupComposer(chat, form);
    setupStop(chat, form);
    setupCatchUp(chat, saveDraft);
    setupScrolling(chat);
  });
})();
