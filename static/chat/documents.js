// Documents on the chat page: upload (button or drag and drop), live progress by polling while a document is
// being read or summarized (not once it has settled, nor while the tab is hidden), summary with pages.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  const section = document.getElementById("documents");
  if (!root || !section) return;
  const list = document.getElementById("document-list");
  const form = document.getElementById("document-form");
  const formName = document.getElementById("document-form-name");
  const passwordField = document.getElementById("password-field");
  const errorLine = document.getElementById("document-error");
  const input = document.getElementById("document-input");
  const views = new Map(); // document id -> {el, data, follow}
  const UPLOAD_FAILED = gettext("The upload failed; try again.");
  const CHUNK_STATES = { waiting: gettext("waiting"), running: gettext("summarizing"), done: gettext("done") };
  let pendingFile = null;

  function csrfToken() {
    return form.querySelector("input[name=csrfmiddlewaretoken]").value;
  }

  const el = Qw.el;

  async function post(url, data) {
    const response = await fetch(url, {
      method: "POST",
      body: data,
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken() },
    });
    let body = {};
    try {
      body = await response.json();
    } catch (error) {
      body = { error: UPLOAD_FAILED };
    }
    return { ok: response.ok, body };
  }

  // "3 of 10 pages read": the plural form follows the total.
  function progress(format, done, total) {
    return interpolate(format, { done, total }, true);
  }

  // Draws a document's card; returns whether it is still in motion (being read or summarized).
  function draw(data) {
    let view = views.get(data.id);
    if (!view) {
      view = { el: el("article", "document") };
      view.el.dataset.id = data.id;
      list.append(view.el);
      views.set(data.id, view);
      view.follow = Qw.follow(data.urls.status, (answer) => views.has(data.id) && draw(answer.document));
    }
    if (data.active) view.follow.start();
    const signature = JSON.stringify(data);
    if (view.signature === signature) return data.active; // unchanged: keep the nodes, so a click in progress is not lost
    view.signature = signature;
    view.data = data;
    const node = view.el;
    node.dataset.status = data.status;
    node.textContent = "";
    const header = el("header");
    header.append(el("span", "doc-name", data.name), el("span", "doc-status", data.status_label));
    if (data.status === "extracting" || data.status === "queued") {
      const bar = el("progress");
      bar.max = data.page_count || 1;
      bar.value = data.pages_done;
      const read = progress(
        ngettext("%(done)s of %(total)s page read", "%(done)s of %(total)s pages read", data.page_count),
        data.pages_done,
        data.page_count
      );
      header.append(bar, el("span", "doc-progress", read));
    }
    if (data.chunks_total && (data.status === "summarizing" || data.status === "failed" || data.status === "cancelled")) {
      const bar = el("progress");
      bar.max = data.chunks_total;
      bar.value = data.chunks_done;
      const summarized = progress(
        ngettext("%(done)s of %(total)s part summarized", "%(done)s of %(total)s parts summarized", data.chunks_total),
        data.chunks_done,
        data.chunks_total
      );
      header.append(bar, el("span", "doc-progress", summarized));
    }
    if (data.active) {
      const cancel = el("button", "danger doc-cancel", gettext("Cancel"));
      cancel.type = "button";
      header.append(cancel);
    } else if (data.status !== "failed" || data.chunks_total) {
      if (data.status !== "queued") {
        const again = el("button", "doc-summarize", data.status === "ready" ? gettext("Summarize again") : gettext("Continue the summary"));
        again.type = "button";
        header.append(again);
      }
    }
    const remove = el("button", "danger doc-delete", gettext("Delete"));
    remove.type = "button";
    header.append(remove);
    node.append(header);
    if (data.error) {
      const error = el("div", "error-text doc-error", data.error);
      error.setAttribute("role", "alert");
      node.append(error);
    }
    if (data.scanned_note) node.append(el("div", "note doc-scanned", data.scanned_note));
    if (data.status === "summarizing" && data.chunks.length) {
      const chunks = el("div", "chunks");
      for (const chunk of data.chunks) {
        const item = el("span", "chunk " + chunk.state, (chunk.level ? "Σ" : "") + chunk.pages);
        item.title = CHUNK_STATES[chunk.state] || chunk.state;
        chunks.append(item);
      }
      node.append(chunks);
    }
    if (data.summary) {
      // A model's text, hostile: rendered to sanitized nodes, inserted as nodes (never as markup).
      const summary = el("div", "summary body");
      summary.replaceChildren(QwRender.renderMarkdown(data.summary));
      node.append(summary);
    }
    return data.active;
  }

  // One listener for every card: buttons are redrawn as progress comes in.
  list.addEventListener("click", (event) => {
    const button = event.target.closest("button");
    const card = button && button.closest("article.document");
    const view = card && views.get(card.dataset.id);
    if (!view) return;
    if (button.classList.contains("doc-cancel")) act(view.data.urls.cancel);
    if (button.classList.contains("doc-delete") && window.confirm(gettext("Delete this document, its pages and its summary?"))) remove(view);
    if (button.classList.contains("doc-summarize")) {
      const body = new FormData();
      body.append("language", form.querySelector("select[name=language]").value);
      act(view.data.urls.summarize, body);
    }
  });

  async function act(url, body) {
    // No body rather than an empty multipart one, which Django refuses as malformed.
    const result = await post(url, body);
    if (result.body.document) draw(result.body.document);
    else if (result.body.error) showError(result.body.error);
  }

  async function remove(view) {
    const result = await post(view.data.urls.delete);
    if (!result.ok) {
      showError(result.body.error || UPLOAD_FAILED);
      return;
    }
    view.follow.stop();
    views.delete(view.data.id);
    view.el.remove();
  }

  function showError(message) {
    form.hidden = false;
    errorLine.textContent = message;
  }

  function choose(file) {
    pendingFile = file;
    formName.textContent = file.name;
    passwordField.hidden = true;
    form.querySelector("input[name=password]").value = "";
    errorLine.textContent = "";
    form.hidden = false;
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!pendingFile) return;
    const body = new FormData();
    body.append("file", pendingFile);
    body.append("language", form.querySelector("select[name=language]").value);
    const password = form.querySelector("input[name=password]").value;
    if (password) body.append("password", password);
    if (root.dataset.conversation) body.append("conversation", root.dataset.conversation);
    errorLine.textContent = gettext("Uploading…");
    let result;
    try {
      result = await post(section.dataset.upload, body);
    } catch (error) {
      showError(UPLOAD_FAILED);
      return;
    }
    if (!result.ok) {
      if (result.body.needs_password) {
        passwordField.hidden = false;
        form.querySelector("input[name=password]").focus();
      }
      showError(result.body.error || UPLOAD_FAILED);
      return;
    }
    pendingFile = null;
    form.hidden = true;
    input.value = "";
    if (root.dataset.conversation !== result.body.conversation) {
      window.location.assign(result.body.conversation_url);
      return;
    }
    draw(result.body.document);
  });

  document.getElementById("document-form-cancel").addEventListener("click", () => {
    pendingFile = null;
    form.hidden = true;
    input.value = "";
  });

  input.addEventListener("change", () => {
    if (input.files && input.files[0]) choose(input.files[0]);
  });

  root.addEventListener("dragover", (event) => {
    if (event.dataTransfer && [...event.dataTransfer.types].includes("Files")) {
      event.preventDefault();
      root.classList.add("dragging");
    }
  });
  root.addEventListener("dragleave", () => root.classList.remove("dragging"));
  root.addEventListener("drop", (event) => {
    root.classList.remove("dragging");
    const file = event.dataTransfer && event.dataTransfer.files[0];
    if (!file) return;
    event.preventDefault();
    choose(file);
  });

  Qw.readJson("documents-data").forEach(draw);
})();
