// Behaviour the templates ask for with data- attributes, so they carry no inline handlers
// (a Content-Security-Policy without 'unsafe-inline' scripts then holds on every page).
(function () {
  "use strict";

  // <select data-autosubmit>: choosing an option submits its form (the language picker).
  document.querySelectorAll("select[data-autosubmit]").forEach((select) =>
    select.addEventListener("change", () => select.form.submit())
  );

  // <button data-copy-from="id">: copies the text of the element with that id.
  document.querySelectorAll("button[data-copy-from]").forEach((button) =>
    button.addEventListener("click", () => {
      navigator.clipboard.writeText(document.getElementById(button.dataset.copyFrom).textContent);
    })
  );

  // <span data-width-percent="42.5">: a bar's width, set here because the policy allows no style attributes.
  document.querySelectorAll("[data-width-percent]").forEach((bar) => {
    const percent = Number(bar.dataset.widthPercent);
    if (Number.isFinite(percent)) bar.style.width = Math.min(100, Math.max(0, percent)) + "%";
  });

  // <form data-confirm="question">: submitted only when the person says yes.
  document.querySelectorAll("form[data-confirm]").forEach((form) =>
    form.addEventListener("submit", (event) => {
      if (!confirm(form.dataset.confirm)) event.preventDefault();
    })
  );
})();
