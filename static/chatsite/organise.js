// Drag a conversation onto a project in the sidebar to move it there, or onto the list by date
// (or out of a project's page onto it) to take it out of its project. The same POST as the
// conversation menu's Move; the page reloads to show where it went.
(function () {
  "use strict";
  const TYPE = "application/x-chatsite-move";

  function csrf() {
    const list = document.getElementById("conversation-list");
    return list ? list.dataset.moveCsrf : "";
  }

  // The Move URL of a conversation: the sidebar's, made for a placeholder id.
  const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";
  function moveUrl(id) {
    const sidebar = document.getElementById("sidebar");
    return sidebar ? sidebar.dataset.moveUrl.replace(PLACEHOLDER, id) : "";
  }

  document.addEventListener("dragstart", function (event) {
    const row = event.target.closest && event.target.closest("[draggable][data-conversation]");
    if (!row) return;
    event.dataTransfer.setData(TYPE, moveUrl(row.dataset.conversation));
    event.dataTransfer.effectAllowed = "move";
  });

  function target(event) {
    const zone = event.target.closest && event.target.closest("[data-drop-project]");
    // A project shared with the user (read-only) has an empty id and a list by date too:
    // only the list by date takes a conversation out.
    if (!zone) return null;
    if (zone.dataset.dropProject === "" && zone.id !== "conversation-list") return null;
    return zone;
  }

  document.addEventListener("dragover", function (event) {
    if (!event.dataTransfer.types.includes(TYPE) || !target(event)) return;
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
  });

  document.addEventListener("drop", function (event) {
    const zone = target(event);
    const url = event.dataTransfer.getData(TYPE);
    if (!zone || !url) return;
    event.preventDefault();
    const body = new FormData();
    body.append("project", zone.dataset.dropProject);
    body.append("csrfmiddlewaretoken", csrf());
    fetch(url, { method: "POST", body: body, credentials: "same-origin", redirect: "manual" })
      .then(function () { window.location.reload(); });
  });
})();
