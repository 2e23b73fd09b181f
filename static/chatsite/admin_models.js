// The chat model's change form: "Test connection" asks the server for its models (through the
// admin's test-connection view, with the form's base URL and key) and offers their ids in the
// model field's list.
(function () {
  "use strict";

  function field(form, name) {
    var input = form.elements.namedItem(name);
    if (!input) return "";
    return input.type === "checkbox" ? (input.checked ? "on" : "") : input.value;
  }

  function offer(list, ids) {
    list.replaceChildren();
    ids.forEach(function (id) {
      var option = document.createElement("option");
      option.value = id;
      list.appendChild(option);
    });
  }

  async function test(box, form, result) {
    var body = new FormData();
    ["base_url", "api_key", "api_key_env", "clear_api_key", "csrfmiddlewaretoken"].forEach(
      function (name) { body.append(name, field(form, name)); }
    );
    body.append("object_id", box.dataset.objectId || "");
    result.textContent = box.dataset.testing;
    result.classList.remove("errornote");
    try {
      var response = await fetch(box.dataset.url, { method: "POST", body: body });
      var answer = await response.json();
      if (answer.ok) {
        offer(document.getElementById("server-models"), answer.models);
        result.textContent = answer.summary;
      } else {
        result.textContent = answer.error;
        result.classList.add("errornote");
      }
    } catch (error) {
      result.textContent = box.dataset.failed;
      result.classList.add("errornote");
    }
  }

  // The server's URL and key, and the test, are the openai backend's only: shown for it alone.
  var SERVER_FIELDS = ["base_url", "api_key", "clear_api_key", "api_key_env"];

  function showServerFields(box, backend) {
    var remote = backend.value === "openai";
    // style, not the hidden attribute: the admin's CSS sets the rows' display.
    box.style.display = remote ? "" : "none";
    SERVER_FIELDS.forEach(function (name) {
      var row = document.querySelector(".field-" + name);
      if (row) row.style.display = remote ? "" : "none";
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("connection-test");
    var button = document.getElementById("test-connection");
    if (!box || !button) return;
    var form = button.closest("form");
    var result = document.getElementById("connection-result");
    button.addEventListener("click", function () { test(box, form, result); });
    var backend = form.elements.namedItem("backend");
    if (backend) {
      showServerFields(box, backend);
      backend.addEventListener("change", function () { showServerFields(box, backend); });
    }
  });
})();
