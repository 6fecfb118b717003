"""A person in Chromium: log in, chat, see tokens arrive, press Stop."""

import time

import pytest
from playwright.sync_api import expect

from tests.support.client import base_url, make_user
from tests.support.page_checks import PAGE_SPY
from tests.support.profiles import live_id_here

pytestmark = pytest.mark.usefixtures("web_server")


def log_in(page, user):
    page.goto(base_url() + "/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", user.raw_password)
    page.click("button[type=submit]")
    expect(page.locator("#composer")).to_be_visible()
    page.wait_for_function("() => document.getElementById('chat').dataset.connected === '1'")


def long_answer_streaming(page, shown_chars: int, profile):
    """Ask for a long answer from ``profile`` (the ``endless`` one: it runs to the chat's token limit
    whatever the model would choose, so it is still being written when the test acts); returns its
    article once it streams with more than ``shown_chars`` shown."""
    page.select_option("#profile", profile.name)
    page.fill("#prompt", "Write a long story about a lighthouse keeper.")
    page.keyboard.press("Enter")
    answer = page.locator("article.message.assistant").last
    expect(answer).to_have_attribute("data-status", "streaming")
    page.wait_for_function(
        "(n) => { const a = [...document.querySelectorAll('article.assistant')].pop();"
        " return a && a.dataset.status === 'streaming' && a.querySelector('.body').textContent.length > n; }",
        arg=shown_chars,
        timeout=60_000,
    )
    return answer


def test_login_chat_stream_and_stop(browser, llama, endless):
    user = make_user()
    page = browser.new_page()
    log_in(page, user)

    # Tokens arrive while the answer is still being written.
    answer = long_answer_streaming(page, 20, endless)
    expect(page.locator("#stop")).to_be_visible()
    served = live_id_here(endless)
    assert any(slot["is_processing"] for slot in llama.slots(served))

    page.click("#stop")
    expect(answer).to_have_attribute("data-status", "stopped", timeout=10_000)
    expect(answer.locator(".badge.stopped")).to_be_visible()
    deadline = time.monotonic() + 5  # each hop (web, router, instance) notices on its next write
    while any(slot["is_processing"] for slot in llama.slots(served)):
        assert time.monotonic() < deadline, "slot still busy after Stop"
        time.sleep(0.05)

    # The conversation is in the list and survives a reload, partial answer included.
    kept = answer.locator(".body").inner_text()
    page.reload()
    expect(page.locator("#conversation-list li.current")).to_have_count(1)
    expect(page.locator("article.message.assistant").last.locator(".body")).to_have_text(
        kept, use_inner_text=True
    )  # both sides as shown: a <br> is a line break
    page.close()


def test_model_output_cannot_run_script(browser, llama):
    from chat.models import Conversation, Message

    user = make_user()
    conversation = Conversation.objects.create(owner=user, title="xss")
    Message.objects.create(conversation=conversation, role="user", content="hi")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        reasoning="The user wants code. <b>bold?</b>",
        content='Here:\n\n<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>\n\n```python\nprint("ok")\n```',
    )
    page = browser.new_page()
    page.add_init_script(PAGE_SPY)
    log_in(page, user)
    page.goto(f"{base_url()}/c/{conversation.id}/")
    expect(page.locator("article.assistant pre code")).to_contain_text('print("ok")')
    # The thinking sits in its own collapsed block, shown as text.
    thought = page.locator("article.assistant details.reasoning")
    expect(thought).to_be_visible()
    assert thought.get_attribute("open") is None
    thought.locator("summary").click()
    expect(thought.locator(".thought")).to_have_text("The user wants code. <b>bold?</b>")
    # The image (same-origin "x", kept) failed to load: its error event, and any handler left on it, has run.
    page.wait_for_function("() => window.qwImageErrors.includes('x')")
    assert page.evaluate("window.pwned") is None
    page.close()


def test_chinese_browser_gets_chinese_ui(browser, web_server):
    context = browser.new_context(locale="zh-CN", extra_http_headers={"Accept-Language": "zh-CN,zh;q=0.9"})
    page = context.new_page()
    page.goto(base_url() + "/login/")
    expect(page.locator("h1")).to_have_text("登录")
    context.close()


def test_web_server_killed_mid_answer_page_reconnects_and_says_so(browser, llama, web_server, endless):
    """The page's socket reconnects by itself to the restarted web server and shows the stored
    state of the answer it was streaming: its partial text kept, marked interrupted."""
    from tests.support.stack import wait_until

    user = make_user()
    page = browser.new_page()
    log_in(page, user)
    answer = long_answer_streaming(page, 0, endless)
    web_server.kill()
    expect(page.locator("#status")).to_have_text("Connection lost; reconnecting…", timeout=10_000)
    web_server.start()
    wait_until(lambda: page.evaluate("document.getElementById('chat').dataset.connected") == "1", 60, "reconnected")
    expect(answer).to_have_attribute("data-status", "incomplete", timeout=15_000)
    expect(answer.locator(".error-text")).to_have_text(
        "This answer was interrupted when the server restarted. The partial answer was kept."
    )
    page.close()
