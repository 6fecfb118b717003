// A collection's page: its documents and how far each got (asked again while some are being read),
// many files added at once (each sent by itself, so a refused one is named and the others go on),
// a document deleted, and the collection's delete confirmed.
(function () {
  "use strict";

  const root = document.getElementById("collection");
  if (!root) return;
  const rows = document.getElementById("collection-documents");
  const upload = document.getElementById("collection-upload");
  const errors = document.getElementById("upload-errors");
  const MOVING = ["waiting", "indexing"];

  function csrfToken() {
    return document.querySelector("input[name=csrfmiddlewaretoken]").value;
  }

  function progressText(entry) {
    if (entry.state === "indexing" && entry.passage_count) {
      return interpolate(ngettext("%(state)s: %(done)s of %(count)s passage", "%(state)s: %(done)s of %(count)s passages", entry.passage_count), { state: entry.state_label, done: entry.passages_done, count: entry.passage_count }, true);
    }
    return entry.state_label;
  }

  function draw(entries) {
    rows.textContent = "";
    for (const entry of entries) {
      const row = Qw.el("tr", "collection-document");
      row.dataset.state = entry.state;
      row.dataset.id = entry.id;
      row.append(Qw.el("td", "doc-name", entry.name));
      const state = Qw.el("td", "doc-state", progressText(entry));
      if (entry.error) state.append(Qw.el("div", "doc-error error-text", entry.error));
      row.append(state);
      const actions = Qw.el("td");
      if (upload) {
        const remove = Qw.el("button", "danger doc-delete", gettext("Delete"));
        remove.type = "button";
        remove.addEventListener("click", () => removeDocument(entry.id));
        actions.append(remove);
      }
      row.append(actions);
      rows.append(row);
    }
    return entries.some((entry) => MOVING.includes(entry.state));
  }

  const initial = Qw.readJson("entries-data");
  const follower = Qw.follow(root.dataset.documents, (answer) => draw(answer.documents), { moving: draw(initial) });

  async function post(url, body) {
    return fetch(url, { method: "POST", body, credentials: "same-origin", headers: { "X-CSRFToken": csrfToken() } });
  }

  async function removeDocument(id) {
    if (!window.confirm(gettext("Delete this document from the collection?"))) return;
    await post(root.dataset.delete.replace("00000000-0000-0000-0000-000000000000", id));
    follower.start();
  }

  if (upload) {
    upload.addEventListener("submit", async (event) => {
      event.preventDefault();
      const input = document.getElementById("collection-files");
      errors.textContent = "";
      for (const file of Array.from(input.files)) {
        const body = new FormData();
        body.append("file", file);
        let message = "";
        try {
          const response = await post(root.dataset.add, body);
          if (!response.ok) message = (await response.json()).error || response.statusText;
        } catch (error) {
          message = gettext("The upload did not reach the server.");
        }
        if (message) {
          const item = Qw.el("li", "upload-error", file.name + ": " + message);
          errors.append(item);
        }
        follower.start();
      }
      input.value = "";
    });
  }

  const deleteForm = document.getElementById("delete-collection");
  if (deleteForm) {
    deleteForm.addEventListener("submit", (event) => {
      if (!window.confirm(deleteForm.dataset.confirm)) event.preventDefault();
    });
  }
})();
