// The pages an answer's citations open: under each answer that was given passages of knowledge
// collections, a link to each page it cites (to every page it was given when it cites none). Asked when
// the page opens and each time an answer ends; the server lists only collections the person may read now.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  if (!root || !root.dataset.sources) return;
  const list = document.getElementById("messages");
  const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";
  const CITED = /(?:\bpp?\.|\bpages?|§§?|第)\s*(\d{1,5}(?:\s*(?:-|–|—|to)\s*\d{1,5})?(?:\s*(?:,|and|&)\s*\d{1,5}(?:\s*(?:-|–|—|to)\s*\d{1,5})?)*)/gi;

  function citedPages(text) {
    const pages = new Set();
    for (const match of text.matchAll(CITED)) {
      for (const span of match[1].split(/,|and|&/)) {
        const [low, high] = span.split(/-|–|—|to/).map((part) => parseInt(part, 10));
        for (let page = low; page <= (high || low) && page - low < 2000; page++) pages.add(page);
      }
    }
    return pages;
  }

  function pageUrl(source) {
    const base = root.dataset.citedPage.replace(PLACEHOLDER, source.document);
    return base.replace(/\/0\/$/, "/" + source.page + "/");
  }

  function draw(article, sources) {
    const old = article.querySelector(".sources");
    if (old) old.remove();
    if (!sources || !sources.length) return;
    const body = article.querySelector(".body");
    const cited = citedPages(body ? body.textContent : "");
    const shown = sources.filter((source) => cited.has(source.page));
    const box = Qw.el("div", "sources");
    box.append(Qw.el("span", "sources-label", shown.length ? gettext("Sources:") : gettext("Passages given:")));
    for (const source of shown.length ? shown : sources) {
      const link = Qw.el("a", "source-link", source.name + ", " + interpolate(gettext("p. %s"), [source.page]));
      link.href = pageUrl(source);
      link.target = "_blank";
      link.rel = "noopener";
      box.append(" ", link);
    }
    article.append(box);
  }

  let asking = false;
  let again = false;
  async function refresh() {
    if (asking) {
      again = true;
      return;
    }
    asking = true;
    try {
      const response = await fetch(root.dataset.sources, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (response.ok) {
        const sources = (await response.json()).sources;
        for (const article of list.querySelectorAll("article.message.assistant")) {
          draw(article, sources[article.dataset.id]);
        }
      }
    } finally {
      asking = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }

  new MutationObserver((changes) => {
    if (changes.some((change) => change.target.dataset && change.target.dataset.status === "complete")) refresh();
  }).observe(list, { attributes: true, attributeFilter: ["data-status"], subtree: true });
  refresh();
})();
