"""A person in Chromium whose answer's server freezes mid-answer (SIGSTOP of its only instance, at a point
the test holds: the answer streaming): the page says the answer waits, then the text goes on in the same
message, marked "resumed on NODE", and the page opened again shows it the same (issue 52)."""

import os
import signal

import psutil
import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.browser.test_chat_page import log_in, long_answer_streaming
from tests.support.client import make_user
from tests.support.profiles import ignoring_eos, live_id_here

pytestmark = pytest.mark.usefixtures("web_server")


@pytest.fixture
def freezable(llama):
    # Short answers (a small context: the page sets no length), a short hang limit: the freeze is noticed soon.
    with ignoring_eos(llama, "resume-page", hang_limit_s=4, ctx_size=512) as profile:
        yield profile


def test_an_answer_whose_server_froze_goes_on_in_the_same_message_marked_resumed(browser, llama, freezable):
    page = browser.new_page()
    log_in(page, make_user())
    answer = long_answer_streaming(page, 0, freezable)
    frozen = llama.instance_pid(live_id_here(freezable))
    os.kill(frozen, signal.SIGSTOP)
    try:
        expect(page.locator("#status")).to_contain_text("goes on as soon as a server can take it", timeout=60_000)
        expect(answer).to_have_attribute("data-status", "complete", timeout=300_000)
    finally:
        if psutil.pid_exists(frozen):
            os.kill(frozen, signal.SIGCONT)
    mark = f"resumed on {settings.NODE_NAME}"
    expect(answer.locator(".badge.resumed")).to_have_text(mark)
    expect(page.locator("article.message.assistant")).to_have_count(1)  # one message, not two
    shown = answer.locator(".body").text_content()
    page.reload()
    again = page.locator("article.message.assistant")
    expect(again).to_have_count(1)
    expect(again.locator(".badge.resumed")).to_have_text(mark)
    expect(again.locator(".body")).to_have_text(shown)
    page.close()
