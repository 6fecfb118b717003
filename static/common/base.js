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

  // <button data-toggle="id">: opens and closes a panel (the conversation drawer, the header's menu on a
  // phone). While one is open a shade covers the page; the shade, Esc or the button again closes it.
  const shade = document.createElement("div");
  shade.className = "backdrop";
  shade.hidden = true;
  document.body.append(shade);
  let openPanel = null;

  function closePanel() {
    if (!openPanel) return;
    const { panel, button } = openPanel;
    openPanel = null;
    panel.classList.remove("open");
    button.setAttribute("aria-expanded", "false");
    shade.hidden = true;
    if (panel.contains(document.activeElement)) button.focus();
  }

  function openPanelFor(button, panel) {
    closePanel();
    openPanel = { panel, button };
    panel.classList.add("open");
    button.setAttribute("aria-expanded", "true");
    shade.hidden = false;
    const first = panel.querySelector("a[href], button, select, input");
    if (first) first.focus();
  }

  document.querySelectorAll("button[data-toggle]").forEach((button) =>
    button.addEventListener("click", () => {
      const panel = document.getElementById(button.dataset.toggle);
      if (openPanel && openPanel.panel === panel) closePanel();
      else if (panel) openPanelFor(button, panel);
    })
  );
  shade.addEventListener("click", closePanel);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closePanel();
  });

  // <textarea data-autogrow>: grows with its text up to its CSS max-height, where the browser cannot
  // (CSS field-sizing does it elsewhere).
  if (!(window.CSS && CSS.supports("field-sizing", "content"))) {
    document.querySelectorAll("textarea[data-autogrow]").forEach((area) => {
      const fit = () => {
        area.style.height = "auto";
        area.style.height = area.scrollHeight + 2 + "px";
      };
      area.addEventListener("input", fit);
    });
  }
})();
