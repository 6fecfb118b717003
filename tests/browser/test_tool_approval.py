"""A writing tool in the chat page: its step shows with Allow and Deny, and the person's click decides;
a tool's result is rendered through the strict profile model output goes through.
The wired Qwen3.5 model calls the test tool ``write_note`` (tests/support/tool_provider.py) in a web
process that offers it; nothing here depends on what the model chooses to write."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from chat.models import Conversation, Message
from tests.browser.test_chat_page import log_in
from tests.support.client import base_url, make_user
from tests.support.tool_provider import notes_file
from tests.support.tool_stack import tool_web_server, tools_profile


@pytest.fixture(scope="module")
def profile(llama_server, redis_server, run_dir):
    # Set up before the browser (its event loop in this thread would refuse the profile's async_to_sync).
    with tool_web_server(run_dir, QWENWEB_TOOL_STEP_LIMIT="1"), tools_profile() as profile:
        yield profile


def _asked(browser, profile, tool: str):
    """A person's conversation offered ``tool``, open in a page that has just sent a question."""
    user = make_user()
    conversation = Conversation.objects.create(
        owner=user, profile=profile, title=f"tool:{tool}", tools_enabled=True, thinking_enabled=False
    )
    page = browser.new_page()
    log_in(page, user)
    page.goto(f"{base_url()}/c/{conversation.id}/")
    page.wait_for_function("() => document.getElementById('chat').dataset.connected === '1'")
    page.fill("#prompt", "Use the tool.")
    page.keyboard.press("Enter")
    return conversation, page


@pytest.mark.parametrize(("button", "state", "ran"), [("Allow", "done", True), ("Deny", "denied", False)])
def test_allow_and_deny_in_the_page_decide_whether_a_writing_tool_runs(profile, browser, button, state, ran):
    conversation, page = _asked(browser, profile, "write_note")
    try:
        expect(page.locator("#tools-enabled")).to_be_checked()
        step = page.locator("article.message.assistant .tool-step").first
        expect(step).to_have_attribute("data-state", "waiting", timeout=120_000)
        assert not notes_file(conversation.id).exists()  # nothing runs before the click
        step.get_by_role("button", name=button).click()
        expect(step).to_have_attribute("data-state", state, timeout=60_000)
        expect(step.locator(".tool-approval")).to_be_hidden()
        answer = page.locator("article.message.assistant").last
        expect(answer).to_have_attribute("data-status", "complete", timeout=120_000)
        assert notes_file(conversation.id).exists() is ran
        stored = Message.objects.filter(conversation=conversation, role="assistant").get()
        assert [s["state"] for s in stored.tool_steps] == [state]
        # The page opened again shows the stored step.
        page.reload()
        expect(page.locator("article.message.assistant .tool-step").first).to_have_attribute("data-state", state)
    finally:
        page.close()


def test_a_tool_result_is_rendered_inert_like_model_output(profile, browser):
    _conversation, page = _asked(browser, profile, "hostile")
    try:
        answer = page.locator("article.message.assistant").last
        expect(answer).to_have_attribute("data-status", "complete", timeout=120_000)
        result = answer.locator(".tool-step .tool-result")
        expect(result.locator("strong")).to_have_text("bold")  # Markdown rendered, as model output is
        assert result.locator("script, button, [onerror], [onclick]").count() == 0
        assert page.evaluate("() => window.toolResultRan") is None
    finally:
        page.close()
