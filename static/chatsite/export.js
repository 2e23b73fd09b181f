// "Download all conversations": the JSONL export answers in pages of a few MiB (a server never
// holds a whole history for a slow reader), each naming the next in its Link header; this
// follows them and saves one file.
(function () {
  "use strict";

  function nextPage(response) {
    var link = response.headers.get("Link") || "";
    var match = /<([^>]+)>;\s*rel="next"/.exec(link);
    return match ? match[1] : null;
  }

  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("export-all");
    var status = document.getElementById("export-all-status");
    if (!button) return;
    button.addEventListener("click", async function () {
      button.disabled = true;
      var parts = [];
      var url = button.dataset.url;
      try {
        while (url) {
          status.textContent = interpolate(ngettext("Downloading… %s page", "Downloading… %s pages", parts.length), [parts.length]);
          var response = await fetch(url, { credentials: "same-origin" });
          if (!response.ok) throw new Error("HTTP " + response.status);
          parts.push(await response.blob());
          url = nextPage(response);
        }
        var file = new Blob(parts, { type: "application/x-ndjson" });
        var link = document.createElement("a");
        link.href = URL.createObjectURL(file);
        link.download = "conversations.jsonl";
        document.body.appendChild(link);
        link.click();
        link.remove();
        setTimeout(function () { URL.revokeObjectURL(link.href); }, 10000);
        status.textContent = gettext("Downloaded.");
      } catch (error) {
        status.textContent = interpolate(gettext("The download failed (%s). Try again."), [error.message]);
      } finally {
        button.disabled = false;
      }
    });
  });
})();
