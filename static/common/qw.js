// Helpers every page script shares, published as window.Qw. Loaded by base.html before the page scripts
// (no bundler); it only defines functions, so loading it on a page that needs none of them costs nothing.
// Translated strings are not its business: they come from Django's JavaScript catalogue, which base.html
// loads first (gettext(), ngettext() and interpolate(), globals), and nothing else carries text for scripts.
(function () {
  "use strict";

  // How often a page asks the server again for something that is still changing.
  const POLL_INTERVAL_MS = 1000;

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

  // Keeps a page in step with something changing on the server, asking only while it is in motion.
  // onData(answer) draws the answer and returns whether anything is still in motion; asking ends when it
  // says no (a failed request asks again next round). Nothing is asked while the tab is hidden; shown
  // again, a follow still in motion asks at once. start(): the page itself set something in motion (an
  // answer asked for before the latest start cannot end it); stop(): the thing followed is gone.
  function follow(url, onData, options) {
    const intervalMs = (options && options.intervalMs) || POLL_INTERVAL_MS;
    let moving = Boolean(options && options.moving);
    let starts = 0;
    let timer = null;
    let asking = false;

    function schedule(delayMs) {
      if (!moving || asking || timer !== null || document.hidden) return;
      timer = setTimeout(ask, delayMs);
    }

    async function ask() {
      timer = null;
      asking = true;
      const round = starts;
      try {
        const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        if (response.ok && !onData(await response.json()) && round === starts) moving = false;
      } catch (error) {
        /* asked again next round */
      } finally {
        asking = false;
      }
      schedule(intervalMs);
    }

    function start() {
      starts++;
      moving = true;
      schedule(intervalMs);
    }

    function stop() {
      moving = false;
      clearTimeout(timer);
      timer = null;
    }

    document.addEventListener("visibilitychange", () => {
      if (!document.hidden) {
        schedule(0);
      } else if (timer !== null) {
        clearTimeout(timer);
        timer = null;
      }
    });
    schedule(intervalMs); // the page was drawn with the current state: the first ask waits one round
    return Object.freeze({ start, stop });
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
    const values = { minutes: Math.floor(seconds / 60), seconds: seconds % 60 };
    const format = values.minutes ? gettext("%(minutes)s min %(seconds)s s") : gettext("%(seconds)s s");
    return interpolate(format, values, true);
  }

  window.Qw = Object.freeze({
    readJson,
    dataNumber,
    el,
    socketUrl,
    follow,
    number,
    gigabytes,
    bytes,
    duration,
  });
})();
