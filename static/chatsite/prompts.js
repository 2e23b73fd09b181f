// The composer's prompt library: "/" at the start of the message box lists the saved prompts
// (the user's and their groups', from data-prompts), filtered by what follows it as it is typed.
// The list is a listbox the message box drives: ArrowDown/ArrowUp move through it (the box keeps
// the focus and points at the option with aria-activedescendant), Enter or Tab picks, Escape
// closes it and leaves the text as typed. A prompt with {{name}} variables asks for their values
// in a small dialog first. Values are put in as plain text, in one pass: a value is never read as
// a pattern or a variable, and the text only ever goes in the box as its value, never as HTML.
(function () {
  "use strict";

  var VARIABLE = /\{\{\s*([^{}]*?)\s*\}\}/g;  // as conversations.models.prompts.VARIABLE
  var PREVIEW_CHARS = 80;

  function fill(text, values) {
    // A function as the replacement: "$&" in a value stays "$&".
    return text.replace(VARIABLE, function (whole, name) {
      return Object.prototype.hasOwnProperty.call(values, name) ? values[name] : whole;
    });
  }

  function setup(form) {
    var box = form.querySelector("textarea[data-prompts]");
    var menu = document.getElementById("prompt-menu");
    var status = document.getElementById("prompt-menu-status");
    var dialog = document.getElementById("prompt-fill");
    if (!box || !menu || !dialog) return;
    var loading = null;
    var shown = [];
    var active = -1;
    var dismissed = false;  // Escape closed the list: it stays closed until the "/" is gone
    var inserting = false;
    var filled = false;  // the dialog closed by Insert, not cancelled

    function load() {
      if (!loading) {
        loading = fetch(box.dataset.prompts, { headers: { Accept: "application/json" } })
          .then(function (response) {
            if (!response.ok) throw new Error("prompts: " + response.status);
            return response.json();
          })
          .then(function (data) { return data.prompts; })
          .catch(function () { loading = null; return []; });  // tried again at the next "/"
      }
      return loading;
    }

    // What follows a "/" that starts a one-line message, or null when the list is not asked for.
    function query() {
      var match = /^\/([^\n]*)$/.exec(box.value);
      return match ? match[1].trim().toLowerCase() : null;
    }

    function isOpen() { return !menu.hidden; }

    function close() {
      menu.hidden = true;
      menu.replaceChildren();
      shown = [];
      active = -1;
      box.removeAttribute("aria-activedescendant");
    }

    function say(text) { if (status) status.textContent = text; }

    function setActive(index) {
      active = index;
      Array.prototype.forEach.call(menu.children, function (option, i) {
        option.setAttribute("aria-selected", i === index ? "true" : "false");
      });
      var option = menu.children[index];
      if (!option) return box.removeAttribute("aria-activedescendant");
      box.setAttribute("aria-activedescendant", option.id);
      option.scrollIntoView({ block: "nearest" });
    }

    function option(prompt, index) {
      var item = document.createElement("li");
      item.id = "prompt-option-" + prompt.id;
      item.setAttribute("role", "option");
      item.dataset.index = String(index);
      var title = document.createElement("span");
      title.className = "prompt-option-title";
      title.textContent = prompt.title;
      var preview = document.createElement("span");
      preview.className = "prompt-option-text";
      var text = prompt.text.replace(/\s+/g, " ").trim();
      preview.textContent = (text.length > PREVIEW_CHARS ? text.slice(0, PREVIEW_CHARS) + "…" : text) +
        (prompt.shared_by ? " · " + interpolate(gettext("from %s"), [prompt.shared_by]) : "");
      item.append(title, preview);
      return item;
    }

    function render(prompts) {
      var q = query();
      if (q === null || dismissed || inserting) return close();
      shown = prompts.filter(function (prompt) {
        return !q || (prompt.title + "\n" + prompt.text).toLowerCase().indexOf(q) >= 0;
      });
      if (!shown.length) {
        close();
        say(prompts.length ? gettext("No saved prompt matches.") : gettext("No saved prompts yet."));
        return;
      }
      menu.replaceChildren.apply(menu, shown.map(option));
      menu.hidden = false;
      setActive(0);
      say(interpolate(ngettext(
        "%s saved prompt: arrow keys to choose, Enter to use, Escape to close.",
        "%s saved prompts: arrow keys to choose, Enter to use, Escape to close.",
        shown.length), [shown.length]));
    }

    function insert(text) {
      inserting = true;
      box.value = text;
      box.dispatchEvent(new Event("input", { bubbles: true }));  // chat.js: size, draft, limit
      inserting = false;
      box.focus();
      box.setSelectionRange(box.value.length, box.value.length);
    }

    function choose(prompt) {
      close();
      if (prompt.variables.length) ask(prompt);
      else insert(prompt.text);
    }

    // The dialog asks for each variable's value; Insert puts the filled text in the box.
    function ask(prompt) {
      var fields = dialog.querySelector(".prompt-fields");
      dialog.querySelector("#prompt-fill-title").textContent = prompt.title;
      fields.replaceChildren.apply(fields, prompt.variables.map(function (name, i) {
        var label = document.createElement("label");
        label.setAttribute("for", "prompt-variable-" + i);
        label.textContent = name;
        var input = document.createElement("input");
        input.id = "prompt-variable-" + i;
        input.dataset.variable = name;
        input.required = true;
        input.autocomplete = "off";
        var row = document.createElement("p");
        row.append(label, input);
        return row;
      }));
      dialog.prompt = prompt;
      dialog.showModal();
      fields.querySelector("input").focus();
    }

    dialog.querySelector("form").addEventListener("submit", function (event) {
      event.preventDefault();
      var values = {};
      dialog.querySelectorAll("input[data-variable]").forEach(function (input) {
        values[input.dataset.variable] = input.value;
      });
      var text = fill(dialog.prompt.text, values);
      filled = true;
      dialog.close();
      insert(text);
    });
    dialog.querySelector("button.cancel").addEventListener("click", function () { dialog.close(); });
    // Cancelled (the button or Escape): back to the box, its "/" text as it was, the list shut.
    dialog.addEventListener("close", function () {
      if (!filled) {
        dismissed = query() !== null;
        box.focus();
      }
      filled = false;
    });

    box.addEventListener("input", function () {
      if (query() === null) dismissed = false;
      if (inserting) return;
      if (query() === null || dismissed) return close();
      load().then(render);
    });
    box.addEventListener("blur", function () { if (isOpen()) close(); });

    // Capturing on the form, so Enter picks a prompt before chat.js's Enter sends, and Escape
    // closes the list before page.js's Escape stops a reply.
    form.addEventListener("keydown", function (event) {
      if (event.target !== box || !isOpen() || event.isComposing) return;
      var handled = true;
      if (event.key === "ArrowDown") setActive((active + 1) % shown.length);
      else if (event.key === "ArrowUp") setActive((active - 1 + shown.length) % shown.length);
      else if ((event.key === "Enter" && !event.shiftKey) || event.key === "Tab") {
        choose(shown[active < 0 ? 0 : active]);
      } else if (event.key === "Escape") {
        dismissed = true;
        close();
        say("");
      } else handled = false;
      if (!handled) return;
      event.preventDefault();
      event.stopPropagation();
    }, true);

    // A click picks too; pressing the option does not take the focus from the box.
    menu.addEventListener("mousedown", function (event) { event.preventDefault(); });
    menu.addEventListener("click", function (event) {
      var item = event.target.closest("[role=option]");
      if (item) choose(shown[Number(item.dataset.index)]);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("send-form");
    if (form) setup(form);
  });
})();
