// Conversation tools on the chat page: an Edit button on each question, the bulk-delete checkboxes, a
// question before anything is deleted.
// The answer after an edit is started by chat.js (the page's data-regenerate flag).
(function () {
  "use strict";

  const list = document.getElementById("messages");
  const template = document.getElementById("edit-template");

  function openEditor(article, button) {
    const form = template.content.firstElementChild.cloneNode(true);
    form.action = form.dataset.action.replace("/m/0/", "/m/" + article.dataset.id + "/");
    const body = article.querySelector(".body");
    form.querySelector("textarea").value = body ? body.textContent : "";
    form.querySelector(".edit-cancel").addEventListener("click", () => {
      form.remove();
      button.hidden = false;
    });
    button.hidden = true;
    article.append(form);
    form.querySelector("textarea").focus();
  }

  function addEditButton(article) {
    if (!/^\d+$/.test(article.dataset.id || "") || article.querySelector(".edit-question")) return;
    const button = document.createElement("button");
    button.type = "button";
    button.className = "link edit-question";
    button.textContent = gettext("Edit");
    button.addEventListener("click", () => openEditor(article, button));
    article.append(button);
  }

  if (list && template) {
    list.querySelectorAll("article.message.user").forEach(addEditButton);
    new MutationObserver((changes) => {
      for (const change of changes) {
        for (const node of change.addedNodes) {
          if (node.nodeType === 1 && node.matches("article.message.user")) addEditButton(node);
        }
      }
    }).observe(list, { childList: true });
  }

  // A deleting form is sent only when the person says yes.
  function confirmFirst(form, question) {
    if (form) form.addEventListener("submit", (event) => confirm(question) || event.preventDefault());
  }

  confirmFirst(document.getElementById("delete-conversation"), gettext("Delete this conversation?"));
  const bulkButton = document.getElementById("bulk-delete-button");
  const bulkForm = document.getElementById("bulk-delete");
  confirmFirst(
    bulkForm,
    gettext("Delete the selected conversations with their messages and documents? This cannot be undone.")
  );
  if (bulkButton && bulkForm) {
    bulkForm.addEventListener("change", () => {
      bulkButton.disabled = !bulkForm.querySelector("input.bulk-check:checked");
    });
  }
})();
