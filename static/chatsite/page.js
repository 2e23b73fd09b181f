// Every page's controls that do not need the socket: Copy buttons (a reply's, a code block's, a
// new token's or share link's), local times, the theme, the phone's conversations drawer, the
// keyboard shortcuts and their help dialog.
// - Copy: a reply's button copies its Markdown (the escaped text in its <template>), a code
//   block's button (added here, after the server's sanitized render) its code;
// - a code block, table or formula too wide for the reply is a tab stop, so keys scroll it;
// - shortcuts: Escape stops the reply being written (or closes what is open), "/" goes to the
//   message box, Alt+Shift+N starts a conversation, Alt+Shift+K goes to the list, "?" shows them.
(function () {
  "use strict";

  var COPIED_MS = 2000;

  function isTyping(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }

  function composer() { return document.querySelector("#send-form textarea"); }

  // --- Copy ---------------------------------------------------------------------------------

  // Code blocks of rendered replies get a toolbar with their language and a Copy button.
  function enhance(root) {
    root.querySelectorAll(".markdown pre").forEach(function (pre) {
      if (pre.parentElement.classList.contains("code-block")) return;
      var wrapper = document.createElement("div");
      wrapper.className = "code-block";
      var toolbar = document.createElement("div");
      toolbar.className = "code-toolbar";
      toolbar.setAttribute("aria-live", "off"); // #copy-status announces the copy once
      var language = document.createElement("span");
      var code = pre.querySelector("code");
      var match = code && /(?:^|\s)language-(\S+)/.exec(code.className);
      language.textContent = match ? match[1] : gettext("code");
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy";
      button.dataset.copy = "code";
      var label = document.createElement("span");
      label.className = "copy-label";
      label.textContent = gettext("Copy");
      var hint = document.createElement("span");
      hint.className = "visually-hidden";
      hint.textContent = " " + gettext("the code");
      button.append(label, hint);
      toolbar.append(language, button);
      pre.replaceWith(wrapper);
      wrapper.append(toolbar, pre);
    });
    root.querySelectorAll(SCROLLABLE).forEach(keyboardScrollable);
    // Times are rendered in the server's zone; the reader's own is friendlier.
    root.querySelectorAll("time[datetime]:not([data-local])").forEach(function (time) {
      var moment = new Date(time.getAttribute("datetime"));
      if (isNaN(moment)) return;
      time.dataset.local = "";
      // In the page's language, as the words around it are.
      var language = document.documentElement.lang || [];
      time.textContent = moment.toLocaleString(language, { dateStyle: "medium", timeStyle: "short" });
      time.title = moment.toLocaleString(language, { dateStyle: "full", timeStyle: "long" });
    });
  }

  // A code block, table or formula wider than the reply scrolls sideways; one that does is a
  // tab stop, named, so the keyboard can scroll it too (axe's scrollable-region-focusable).
  var SCROLLABLE = ".markdown pre, .markdown table, .markdown .math.block, .markdown .math.display";

  function keyboardScrollable(element) {
    var scrolls = element.scrollWidth > element.clientWidth + 1;
    if (scrolls === element.hasAttribute("data-scrolls")) return;
    if (!scrolls) {
      ["data-scrolls", "tabindex", "role", "aria-label"].forEach(function (name) {
        element.removeAttribute(name);
      });
      return;
    }
    element.setAttribute("data-scrolls", "");
    element.tabIndex = 0;
    if (element.tagName === "TABLE") {
      element.setAttribute("aria-label", gettext("Table, scrolls sideways"));
      return;
    }
    element.setAttribute("role", "group");
    element.setAttribute("aria-label", element.tagName === "PRE"
      ? gettext("Code, scrolls sideways") : gettext("Formula, scrolls sideways"));
  }

  var resizing = 0;
  window.addEventListener("resize", function () {
    cancelAnimationFrame(resizing);
    resizing = requestAnimationFrame(function () {
      document.querySelectorAll(SCROLLABLE).forEach(keyboardScrollable);
    });
  });

  function textToCopy(button) {
    // A one-time secret's field (a new API token, a new share link) names its input.
    if (button.dataset.copyFrom) return document.getElementById(button.dataset.copyFrom).value;
    if (button.dataset.copy === "code") {
      var pre = button.closest(".code-block").querySelector("pre");
      return (pre.querySelector("code") || pre).textContent;
    }
    var raw = button.closest(".message").querySelector("template.raw-markdown");
    return raw ? raw.content.textContent : "";
  }

  function writeClipboard(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    // Plain HTTP on a LAN address has no async clipboard: the old way still works there.
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "visually-hidden";
      document.body.append(area);
      area.select();
      var ok = document.execCommand("copy");
      area.remove();
      if (ok) resolve(); else reject(new Error("copy refused"));
    });
  }

  function copy(button) {
    var label = button.querySelector(".copy-label") || button;
    var status = document.getElementById("copy-status");
    var focused = document.activeElement;
    function show(text, copied) {
      label.textContent = text;
      if (copied) button.dataset.copied = ""; else delete button.dataset.copied;
      if (status) status.textContent = copied ? gettext("Copied to the clipboard.") : text;
      clearTimeout(button.copyTimer);
      button.copyTimer = setTimeout(function () {
        label.textContent = gettext("Copy");
        delete button.dataset.copied;
        if (status) status.textContent = "";
      }, COPIED_MS);
    }
    writeClipboard(textToCopy(button)).then(
      function () { show(gettext("Copied"), true); },
      function () { show(gettext("Copy failed"), false); }
    ).then(function () { if (focused === button) button.focus(); });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button.copy");
    if (button) copy(button);
  });

  // --- Theme --------------------------------------------------------------------------------

  // The choice shows at once; the form's hx-post remembers it for the next pages.
  document.addEventListener("change", function (event) {
    // A new language needs the page rendered again in it: the form posts and comes back here.
    if (event.target.matches && event.target.matches(".language-form select")) {
      event.target.form.requestSubmit();
      return;
    }
    if (event.target.matches && event.target.matches(".theme-form select")) {
      document.documentElement.dataset.theme = event.target.value;
    }
  });

  // --- The conversations drawer (phones) ----------------------------------------------------

  function drawer() {
    var button = document.querySelector(".menu-button");
    var layout = document.querySelector(".layout.with-chat");
    var visible = button && getComputedStyle(button).display !== "none";
    return { button: button, layout: layout, usable: !!(visible && layout) };
  }

  function setDrawer(open, focusInside) {
    var d = drawer();
    if (!d.layout || !d.button) return;
    d.layout.classList.toggle("sidebar-open", open);
    d.button.setAttribute("aria-expanded", open ? "true" : "false");
    if (open && focusInside) {
      focusList();
    }
  }

  // The list's first conversation (or, with none yet, its New conversation button).
  function focusList() {
    var first = document.querySelector("#conversation-list a") || document.querySelector("#sidebar button");
    if (first) first.focus();
  }

  function drawerOpen() {
    var d = drawer();
    return !!(d.layout && d.layout.classList.contains("sidebar-open"));
  }

  document.addEventListener("click", function (event) {
    var d = drawer();
    if (!d.button) return;
    if (event.target.closest(".menu-button")) {
      setDrawer(!drawerOpen(), true);
    } else if (drawerOpen() && !event.target.closest("#sidebar")) {
      setDrawer(false);
    }
  });

  // --- Keyboard shortcuts -------------------------------------------------------------------

  function openDialog(id) {
    var dialog = document.getElementById(id);
    if (dialog && !dialog.open) dialog.showModal();
  }

  document.addEventListener("click", function (event) {
    var opener = event.target.closest && event.target.closest("[data-open-dialog]");
    if (opener) openDialog(opener.dataset.openDialog);
  });

  function escape(event) {
    if (document.querySelector("dialog[open]")) return; // the dialog closes itself
    var menu = document.querySelector("details.conversation-menu[open]");
    if (menu) {
      menu.open = false;
      menu.querySelector("summary").focus();
    } else if (drawerOpen()) {
      setDrawer(false);
      drawer().button.focus();
    } else {
      var stop = document.getElementById("stop-button");
      if (!stop || stop.disabled) return;
      stop.form.requestSubmit(stop); // chat.js then gives the focus to the message box
    }
    event.preventDefault();
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.isComposing) return;
    if (event.key === "Escape") return escape(event);
    if (event.altKey && event.shiftKey && !event.ctrlKey && !event.metaKey) {
      if (event.code === "KeyN") {
        var form = document.querySelector("form.new-conversation");
        if (form) { event.preventDefault(); form.requestSubmit(); }
      } else if (event.code === "KeyK") {
        event.preventDefault();
        if (drawer().usable) setDrawer(true, true);
        else focusList();
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || isTyping(event.target)) return;
    if (event.key === "?") {
      event.preventDefault();
      openDialog("shortcuts-dialog");
    } else if (event.key === "/" && composer()) {
      event.preventDefault();
      composer().focus();
    }
  });

  document.addEventListener("DOMContentLoaded", function () { enhance(document); });
  document.addEventListener("htmx:wsAfterMessage", function () { enhance(document); });
  // A message too long for a socket frame comes over HTTP in its place (message_loader.html).
  document.addEventListener("htmx:afterSettle", function () { enhance(document); });
})();
