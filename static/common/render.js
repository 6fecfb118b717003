// Markdown as people see it, published as window.QwRender: highlighted code with a copy button, tables that
// scroll inside their own box, TeX maths as native MathML, and an incremental view that re-renders only the
// last (still open) block while an answer streams, so a long answer costs the same per token as a short one.
// Loaded after the vendored marked, DOMPurify, highlight.js and KaTeX, only by pages that render Markdown.
(function () {
  "use strict";

  // What a model writes or a document contains is hostile: parsed by marked, then sanitized by DOMPurify with
  // a strict allowlist. No style, forms, frames, SVG/MathML, ids or names (an id could shadow the page's own
  // JSON blocks); links only http(s)/mailto and open in a new tab; an image only from this app, data: or
  // blob:, and a remote one becomes a link showing its address (fetching it would send the answer's text to
  // any host). The only classes kept are highlight.js's token names (colours, nothing else).
  const MARKDOWN_PROFILE = Object.freeze({
    ALLOWED_TAGS: [
      "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
      "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre",
      "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td",
      "tfoot", "th", "thead", "tr", "u", "ul", "var",
    ],
    ALLOWED_ATTR: ["href", "title", "alt", "src", "align", "colspan", "rowspan", "start", "class"],
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
    SANITIZE_NAMED_PROPS: true,
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|data:image\/(?:png|jpeg|gif|webp);|blob:|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i,
    // Nodes, never markup: the sanitized tree is what the page gets, not a string parsed again (a second
    // parse of sanitized HTML is where mutation XSS lives). They belong to DOMPurify's own inert document,
    // where nothing loads, until the caller inserts them.
    RETURN_DOM_FRAGMENT: true,
  });
  // highlight.js's classes: "hljs", "hljs-keyword", scope modifiers such as "class_", and "language-x".
  const CODE_CLASS = /^(?:hljs(?:-[a-z]+(?:-[a-z]+)*)?|[a-z]+_{1,2}|language-[a-z0-9+#-]{1,32})$/;

  // KaTeX's MathML output, sanitized again on its own: the elements and attributes of MathML Core that
  // KaTeX writes, no links, no styles (a raw <math> in the answer itself is still removed above).
  const MATH_PROFILE = Object.freeze({
    ALLOWED_TAGS: [
      "math", "semantics", "annotation", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msqrt", "mroot",
      "mfrac", "msub", "msup", "msubsup", "munder", "mover", "munderover", "mmultiscripts", "mprescripts",
      "none", "mtable", "mtr", "mtd", "mlabeledtr", "mpadded", "mphantom", "menclose", "mstyle", "merror",
    ],
    ALLOWED_ATTR: [
      "display", "mathvariant", "stretchy", "fence", "separator", "lspace", "rspace", "width", "height", "depth",
      "voffset", "linethickness", "columnalign", "rowalign", "rowspacing", "columnspacing", "columnlines",
      "rowlines", "frame", "framespacing", "displaystyle", "scriptlevel", "accent", "accentunder", "minsize",
      "maxsize", "symmetric", "largeop", "movablelimits", "notation", "encoding", "xmlns",
    ],
    ALLOW_DATA_ATTR: false,
    ALLOW_ARIA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  });
  const KATEX_OPTIONS = Object.freeze({ output: "mathml", throwOnError: true, trust: false, strict: "ignore", maxExpand: 500, maxSize: 50 });

  const LINK_PROTOCOLS = ["http:", "https:", "mailto:"];
  const COPIED_FOR_MS = 1500;

  // Own DOMPurify instances: the class hook must not change how other scripts sanitize.
  const markdownPurifier = DOMPurify(window);
  markdownPurifier.addHook("uponSanitizeAttribute", (node, data) => {
    if (data.attrName !== "class") return;
    const kept = data.attrValue.split(/\s+/).filter((name) => CODE_CLASS.test(name));
    data.attrValue = kept.join(" ");
    data.keepAttr = kept.length > 0 && (node.nodeName === "SPAN" || node.nodeName === "CODE") && Boolean(node.closest("pre"));
  });
  const mathPurifier = DOMPurify(window);

  // Labels, from the page's script catalogue (gettext).
  const LABELS = Object.freeze({
    copy: gettext("Copy"),
    copied: gettext("Copied"),
    copyFailed: gettext("Copy failed"),
    copyCode: gettext("Copy code"),
    copyMessage: gettext("Copy message"),
  });

  // ---- maths: marked extensions turn $...$, \(...\), $$...$$ and \[...\] into numbered placeholders, so
  // Markdown never sees (and mangles) the TeX; the sanitized page gets KaTeX's MathML in their place.
  const SLOT_OPEN = "\uE000";
  const SLOT_CLOSE = "\uE001";
  const SLOT_PATTERN = /\uE000(\d+)\uE001/g;
  let mathSlots = [];

  function mathToken(raw, tex, display) {
    return { type: "math", raw, text: tex.trim(), display };
  }

  const blockMath = {
    name: "math",
    level: "block",
    start: (src) => src.match(/^ {0,3}(?:\$\$|\\\[)/m)?.index,
    tokenizer(src) {
      const match = /^ {0,3}(?:\$\$([\s\S]+?)\$\$|\\\[([\s\S]+?)\\\])[ \t]*(?:\n|$)/.exec(src);
      if (match) return mathToken(match[0], match[1] ?? match[2], true);
    },
    renderer: (token) => slot(token),
  };

  const inlineMath = {
    name: "math",
    level: "inline",
    start: (src) => src.match(/\$|\\[([]/)?.index,
    tokenizer(src) {
      let match = /^\$\$((?:\\[\s\S]|[^$\\])+?)\$\$/.exec(src) || /^\\\[([\s\S]+?)\\\]/.exec(src);
      if (match) return mathToken(match[0], match[1], true);
      // $...$ as pandoc reads it: no space inside the dollars, no digit right after ("$5 and $10" is money);
      // no backtick inside, so a code span after a price stays code.
      match = /^\\\(([\s\S]+?)\\\)/.exec(src) || /^\$(?![\s$])((?:\\[\s\S]|[^$\\\n`])+?)(?<!\s)\$(?!\d)/.exec(src);
      if (match) return mathToken(match[0], match[1], false);
    },
    renderer: (token) => slot(token),
  };

  function slot(token) {
    mathSlots.push(token);
    return SLOT_OPEN + (mathSlots.length - 1) + SLOT_CLOSE;
  }

  function mathNode(token) {
    // A span either way: display maths may sit inside a paragraph ("... \[x\] ...").
    const holder = Qw.el("span", token.display ? "math-display" : "math-inline");
    try {
      const markup = katex.renderToString(token.text, { ...KATEX_OPTIONS, displayMode: token.display });
      holder.replaceChildren(mathPurifier.sanitize(markup, MATH_PROFILE));
    } catch (error) {
      holder.replaceChildren(Qw.el("code", "math-error", token.raw)); // unfinished or wrong TeX shows as written
    }
    return holder;
  }

  function fillMathSlots(root, slots) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const hits = [];
    while (walker.nextNode()) if (walker.currentNode.nodeValue.includes(SLOT_OPEN)) hits.push(walker.currentNode);
    for (const text of hits) {
      const parts = text.nodeValue.split(SLOT_PATTERN); // odd entries are slot numbers
      text.replaceWith(...parts.map((part, i) => (i % 2 ? (slots[part] ? mathNode(slots[part]) : "") : part)));
    }
  }

  // ---- code: highlighted while marked renders it (highlight.js escapes the text); a language it does not
  // know stays plain text.
  function codeRenderer({ text, lang }) {
    const name = ((lang || "").trim().split(/\s+/)[0] || "").toLowerCase();
    const known = /^[a-z0-9+#-]{1,32}$/.test(name) && hljs.getLanguage(name) ? name : "";
    const body = known ? hljs.highlight(text, { language: known, ignoreIllegals: true }).value : escapeHtml(text);
    return `<pre><code${known ? ` class="hljs language-${known}"` : ""}>${body}</code></pre>\n`;
  }

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  const markdown = new marked.Marked({ gfm: true, breaks: true });
  markdown.use({ extensions: [blockMath, inlineMath], renderer: { code: codeRenderer } });

  // ---- decorating the sanitized copy (our own elements, made here, never parsed from the answer)

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
        const link = Qw.el("a", null, url.href);
        link.href = url.href;
        link.target = "_blank";
        link.rel = "noopener noreferrer";
        img.replaceWith(link);
      } else {
        img.remove();
      }
    }
  }

  function decorateCode(root) {
    for (const pre of root.querySelectorAll("pre")) {
      const code = pre.querySelector("code");
      if (!code || pre.parentElement?.classList.contains("code-block")) continue;
      const language = [...code.classList].find((name) => name.startsWith("language-"));
      const head = Qw.el("div", "code-head");
      head.append(Qw.el("span", "code-lang", language ? language.slice("language-".length) : ""));
      head.append(copyCodeButton());
      const block = Qw.el("div", "code-block");
      pre.replaceWith(block);
      block.append(head, pre);
    }
  }

  function copyCodeButton() {
    const button = Qw.el("button", "copy copy-code", LABELS.copy);
    button.type = "button";
    button.setAttribute("aria-label", LABELS.copyCode);
    return button;
  }

  function wrapTables(root) {
    for (const table of root.querySelectorAll("table")) {
      const wrap = Qw.el("div", "table-wrap");
      table.replaceWith(wrap);
      wrap.append(table);
    }
  }

  // Markdown tokens -> a fragment of sanitized, decorated nodes. marked's HTML is parsed once, by DOMPurify,
  // into its inert document: links and images are tightened there, before the caller's insertion adopts
  // them into the page (where an <img> starts loading).
  function renderTokens(tokens) {
    mathSlots = [];
    const html = markdown.parser(tokens);
    const slots = mathSlots;
    const fragment = markdownPurifier.sanitize(html, MARKDOWN_PROFILE);
    tightenLinksAndImages(fragment);
    fillMathSlots(fragment, slots);
    decorateCode(fragment);
    wrapTables(fragment);
    return fragment;
  }

  function normalized(text) {
    return (text || "").replace(/\r\n?/g, "\n");
  }

  // The whole text at once (a document's summary): a DocumentFragment to insert with replaceChildren/append.
  function renderMarkdown(text) {
    return renderTokens(markdown.lexer(normalized(text)));
  }

  // A container that follows a growing text. Blocks followed by another block are settled: rendered once
  // and kept. Each update lexes and renders only the text after them (the open block), so the DOM work per
  // token stays the size of one block however long the answer grows. Text that no longer starts with the
  // settled part (a stored version replacing a stream) starts over.
  function markdownView(container) {
    let settledText = "";
    let openNodes = [];

    function reset() {
      container.replaceChildren();
      settledText = "";
      openNodes = [];
    }

    function update(text) {
      text = normalized(text);
      if (!text.startsWith(settledText)) reset();
      const tail = text.slice(settledText.length);
      const tokens = markdown.lexer(tail);
      let last = tokens.length - 1;
      while (last > 0 && tokens[last].type === "space") last--;
      // The lexer gives back every character as some token's raw text; if it ever did not, render it all as open.
      const settled = tokens.map((token) => token.raw).join("") === tail ? tokens.slice(0, Math.max(last, 0)) : [];
      for (const node of openNodes) node.remove();
      if (settled.length) {
        container.append(renderTokens(settled));
        settledText += settled.map((token) => token.raw).join("");
      }
      const open = renderTokens(tokens.slice(settled.length));
      openNodes = [...open.childNodes]; // kept to be replaced by the next update: the fragment empties on insertion
      container.append(open);
    }

    return Object.freeze({ update, reset });
  }

  // ---- copying: navigator.clipboard exists only on https or localhost; on the LAN over plain http the
  // selection-and-copy command still works.
  async function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      try {
        await navigator.clipboard.writeText(text);
        return true;
      } catch (error) {
        /* fall back below */
      }
    }
    const area = Qw.el("textarea", "copy-buffer");
    area.value = text;
    area.setAttribute("readonly", "");
    document.body.append(area);
    area.select();
    const copied = document.execCommand("copy");
    area.remove();
    return copied;
  }

  async function copyWithFeedback(button, text) {
    const copied = await copyText(text);
    button.dataset.copied = copied ? "1" : "0";
    button.textContent = copied ? LABELS.copied : LABELS.copyFailed;
    setTimeout(() => {
      button.textContent = LABELS.copy;
      delete button.dataset.copied;
    }, COPIED_FOR_MS);
  }

  // A "Copy" button for a whole message; getText gives its text (the Markdown as written) when pressed.
  function copyMessageButton(getText) {
    const button = Qw.el("button", "copy copy-message", LABELS.copy);
    button.type = "button";
    button.title = LABELS.copyMessage;
    button.setAttribute("aria-label", LABELS.copyMessage);
    button.addEventListener("click", () => copyWithFeedback(button, getText()));
    return button;
  }

  // Code blocks are re-rendered while they stream, so their buttons are handled here, once, for the page.
  document.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest("button.copy-code");
    const code = button && button.closest(".code-block")?.querySelector("pre code");
    if (code) copyWithFeedback(button, code.textContent);
  });

  window.QwRender = Object.freeze({ renderMarkdown, markdownView, copyText, copyMessageButton });
})();
