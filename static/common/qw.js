// Helpers every page script shares, published as window.Qw. Loaded by base.html before the page scripts
// (no bundler); it only defines functions, so loading it on a page that needs none of them costs nothing.
(function () {
  "use strict";

  // How often a page asks the server again for something that is still changing.
  const POLL_INTERVAL_MS = 1000;

  // Fill "%(name)s" placeholders: the strings come translated from the views, gettext-style.
  function fmt(template, values) {
    return template.replace(/%\((\w+)\)s/g, (_, key) => (key in values ? String(values[key]) : ""));
  }

  // What a model writes or a document contains is hostile: parsed by the vendored marked, then sanitized by
  // the vendored DOMPurify with a strict allowlist. Both are loaded only by the pages that render Markdown.
  // No style, forms, frames, SVG/MathML, ids or names (an id could shadow the page's own JSON blocks);
  // links only http(s)/mailto and open in a new tab; an image only from this app, data: or blob:, and a
  // remote one becomes a link showing its address (fetching it would send the answer's text to any host).
  const MARKDOWN_PROFILE = Object.freeze({
    ALLOWED_TAGS: [
      "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
      "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre",
      "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td",
      "tfoot", "th", "thead", "tr", "u", "ul", "var",
    ],
    ALLOWED_ATTR: ["href", "title", "alt", "src", "align", "colspan", "rowspan", "start"],
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
    SANITIZE_NAMED_PROPS: true,
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|data:image\/(?:png|jpeg|gif|webp);|blob:|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i,
  });
  const LINK_PROTOCOLS = ["http:", "https:", "mailto:"];

  function parsedUrl(value) {
    try {
      return new URL(value, location.href);
    } catch (error) {
      return null;
    }
  }

  function localImage(url) {
    return url && (url.protocol === "data:" || url.protocol === "blob:" || url.origin === location.origin);
  }

  // Runs on the inert copy in a <template>: nothing in it is fetched until it reaches the page.
  function tightenLinksAndImages(root) {
    for (const link of root.querySelectorAll("a")) {
      const url = parsedUrl(link.getAttribute("href"));
      if (!url || !LINK_PROTOCOLS.includes(url.protocol)) link.removeAttribute("href");
      link.setAttribute("target", "_blank");
      link.setAttribute("rel", "noopener noreferrer");
    }
    for (const img of root.querySelectorAll("img")) {
      const url = parsedUrl(img.getAttribute("src"));
      if (localImage(url)) continue;
      if (url && (url.protocol === "http:" || url.protocol === "https:")) {
        const link = el("a", null, url.href);
        link.href = url.href;
        link.target = "_blank";
        link.rel = "noopener noreferrer";
        img.replaceWith(link);
      } else {
        img.remove();
      }
    }
  }

  function renderMarkdown(text) {
    const sanitized = DOMPurify.sanitize(marked.parse(text || "", { gfm: true, breaks: true }), MARKDOWN_PROFILE);
    // DOMPurify's own DOM output is imported into this document, where an <img> starts loading at once;
    // a <template> keeps the sanitized markup inert while links and images are tightened.
    const inert = document.createElement("template");
    inert.innerHTML = sanitized;
    tightenLinksAndImages(inert.content);
    return inert.innerHTML;
  }

  // The value of a {{ value|json_script:"id" }} block.
  function readJson(id) {
    return JSON.parse(document.getElementById(id).textContent);
  }

  // A number the template put in a data- attribute (a limit from the settings): missing is a page defect.
  function dataNumber(element, name) {
    const raw = element.dataset[name];
    const value = Number(raw);
    if (raw === undefined || raw === "" || !Number.isFinite(value)) {
      throw new Error("qwenweb: the page gives no number in data-" + name.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase()));
    }
    return value;
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text != null) node.textContent = text;
    return node;
  }

  // ws:// or wss:// to this host, matching how the page itself was served.
  function socketUrl(path) {
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    return scheme + location.host + path;
  }

  // Ask `url` for JSON every intervalMs, for as long as the page is open; onData gets each good answer.
  // A failed request or a throwing onData waits for the next round.
  function pollJson(url, onData, options) {
    const intervalMs = (options && options.intervalMs) || POLL_INTERVAL_MS;
    async function poll() {
      try {
        const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        if (response.ok) onData(await response.json());
      } catch (error) {
        /* the next poll tries again */
      }
      setTimeout(poll, intervalMs);
    }
    if (options && options.immediate === false) setTimeout(poll, intervalMs);
    else poll();
  }

  // ---- formatting figures

  function number(value, digits) {
    if (value == null || Number.isNaN(value)) return "—";
    return Number(value).toFixed(digits == null ? 1 : digits);
  }

  function gigabytes(bytes) {
    return bytes == null ? "—" : (bytes / 1e9).toFixed(2) + " GB";
  }

  // Bytes in the largest decimal unit that keeps the figure at or above 1 ("?" when unknown).
  function bytes(count) {
    if (count == null) return "?";
    const units = ["B", "KB", "MB", "GB", "TB"];
    let i = 0;
    while (count >= 1000 && i < units.length - 1) {
      count /= 1000;
      i++;
    }
    return count.toFixed(i ? 1 : 0) + " " + units[i];
  }

  function duration(seconds) {
    if (seconds == null) return "";
    seconds = Math.round(seconds);
    const m = Math.floor(seconds / 60),
      s = seconds % 60;
    return m ? m + " min " + s + " s" : s + " s";
  }

  window.Qw = Object.freeze({
    POLL_INTERVAL_MS,
    fmt,
    renderMarkdown,
    readJson,
    dataNumber,
    el,
    socketUrl,
    pollJson,
    number,
    gigabytes,
    bytes,
    duration,
  });
})();
