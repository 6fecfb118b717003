"""What browser tests watch in a page, each negative check behind a positive signal: a policy violation of
the test's own making closes the list of violations, an image of the test's own making (last in the hostile
text) says the others would have been fetched and their handlers run, and a spy counts every write of an
HTML string (innerHTML, outerHTML, insertAdjacentHTML) the page's scripts make."""

from __future__ import annotations

import base64
import hashlib
import time
import uuid
from urllib.parse import urlsplit

# A same-origin image the hostile texts end with: rendered (images from this app are allowed), fetched
# (a 404), and its error event fired after every image before it was inserted and asked for.
SENTINEL_PATH = "/static/qw-test-sentinel.png"
SENTINEL_MARKDOWN = f"![sentinel]({SENTINEL_PATH})"

# Installed before any page script: records HTML strings written into the page and images that failed.
PAGE_SPY = """
(() => {
  window.qwHtmlWrites = [];
  const note = (how, value) => window.qwHtmlWrites.push(how + ": " + String(value).slice(0, 120));
  for (const [proto, name] of [[Element.prototype, "innerHTML"], [Element.prototype, "outerHTML"], [ShadowRoot.prototype, "innerHTML"]]) {
    const own = Object.getOwnPropertyDescriptor(proto, name);
    Object.defineProperty(proto, name, { ...own, set(value) { note(name, value); own.set.call(this, value); } });
  }
  const adjacent = Element.prototype.insertAdjacentHTML;
  Element.prototype.insertAdjacentHTML = function (where, value) { note("insertAdjacentHTML", value); return adjacent.call(this, where, value); };
  window.qwImageErrors = [];
  document.addEventListener("error", (event) => {
    if (event.target instanceof HTMLImageElement) window.qwImageErrors.push(event.target.getAttribute("src"));
  }, true);
})();
"""


def mutation_xss(url: str) -> list[str]:
    """Mutation-XSS shapes (bypasses of past DOMPurify versions: namespace confusion, parser differences,
    comments and raw-text elements): each runs script (``window.pwned``) or fetches ``url`` if sanitized
    markup is parsed a second time, or if the sanitizer lets it through."""
    img = f"<img src={url}/m{{n}} onerror=window.pwned={{n}}>"
    return [
        f'<svg></p><style><a id="</style>{img.format(n=1)}">',
        f'<math><mtext><table><mglyph><style><!--</style><img title="--&gt;&lt;/mglyph&gt;&lt;img src={url}/m2 onerror=window.pwned=2&gt;">',
        f'<form><math><mtext></form><form><mglyph><svg><mtext><style><path id="</style>{img.format(n=3)}">',
        f'<noscript><p title="</noscript>{img.format(n=4)}">',
        f'<math><mi><table><mi><mglyph><svg><mtext><textarea><path id="</textarea>{img.format(n=5)}">',
        f'<svg><foreignobject><p><style><p title="</style>{img.format(n=6)}"></style>',
        f"<template><style></template>{img.format(n=7)}</style>",
        f'<select><template><style><!--</style><a rel="--></template></select>{img.format(n=8)}">',
        f'<p title="</p>{img.format(n=9)}">title</p>',
        '<a href="&#x6A;avascript:window.pwned=10">entity link</a>',
        '<details open ontoggle="window.pwned=11"><summary>s</summary>d</details>',
        '<iframe srcdoc="&lt;script&gt;parent.pwned=12&lt;/script&gt;"></iframe>',
    ]


def watch_policy(page) -> list[str]:
    """Every Content-Security-Policy violation the page reports."""
    violations: list[str] = []
    page.on(
        "console",
        lambda message: (
            "Content Security Policy" in message.text and violations.append(f"{message.text} at {message.location}")
        ),
    )
    return violations


def policy_violations(page, violations: list[str]) -> list[str]:
    """The page's violations so far, once a last one of the test's own making (an inline script, refused
    and reported after any earlier one) has come in: none is still on its way."""
    source = f"/* {uuid.uuid4().hex} */"
    digest = base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()
    with page.expect_console_message(lambda message: f"sha256-{digest}" in message.text):
        page.evaluate(
            "s => { const script = document.createElement('script'); script.textContent = s; document.body.append(script); }",
            source,
        )
    return [violation for violation in violations if f"sha256-{digest}" not in violation]


def wait_for_sentinel_error(page) -> None:
    """The sentinel image failed (its 404): the images inserted before it were asked for, and their own
    handlers (had any survived) have run."""
    page.wait_for_function("p => window.qwImageErrors.includes(p)", arg=SENTINEL_PATH)


def html_writes(page) -> list[str]:
    return page.evaluate("window.qwHtmlWrites")


class RequestLog:
    """The requests a page makes for one path, counted as they start and as they end."""

    def __init__(self, page, path: str):
        self.page = page
        self.path = path
        self.count = 0
        self.ended = 0
        page.on("request", self._started)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._ended)

    def _started(self, request) -> None:
        self.count += urlsplit(request.url).path == self.path

    def _ended(self, request) -> None:
        self.ended += urlsplit(request.url).path == self.path

    def _until(self, done, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, what
            self.page.wait_for_timeout(50)  # lets Playwright deliver the page's events

    def wait_for(self, count: int, timeout_s: float = 30) -> None:
        """Until the page has asked ``count`` times in all."""
        self._until(lambda: self.count >= count, timeout_s, f"{self.count} requests, not {count}")

    def wait_idle(self, timeout_s: float = 30) -> None:
        """Until every request the page started has come back."""
        self._until(lambda: self.ended >= self.count, timeout_s, "a request never came back")


def requests_to(page, path: str) -> RequestLog:
    return RequestLog(page, path)
