"""A writing tool in the chat page: its step shows with Allow and Deny, and the person's click decides;
a tool's result is rendered through the strict profile model output goes through.
The wired Qwen3.5 model calls the test tool ``write_note`` (tests/support/tool_provider.py) in a web
process that offers it, and likewise a real MCP server's writing tool ``order_toner`` (the official SDK's
test server, tests/support/mcp_server.py), registered and given to a group through the staff page (a
conversation not titled ``tool:<name>`` is offered only the MCP tools its person was given); nothing here
depends on what the model chooses to write."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from chat.models import Conversation, Message
from tests.browser.test_chat_page import log_in
from tests.support.client import base_url, make_user
from tests.support.mcp_server import McpTestServer
from tests.support.mcp_staff import give, register, staff_page
from tests.support.profiles import off_the_loop
from tests.support.tool_provider import notes_file
from tests.support.tool_stack import tool_web_server, tools_profile
from tests.support.tool_turns import slot_free

DENIED = "You denied this tool call, so it did not run."

# Set up before the browser (its event loop in this thread would refuse their async_to_sync): the
# profile, and the MCP server registered through the staff page (which lists its tools).
pytestmark = pytest.mark.usefixtures("profile", "toner_buyers")


@pytest.fixture(scope="module")
def profile(llama_server, redis_server, run_dir):
    with tool_web_server(run_dir, QWENWEB_TOOL_STEP_LIMIT="1"), tools_profile() as profile:
        yield profile


@pytest.fixture(scope="module")
def mcp_server():
    server = McpTestServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def toner_buyers(mcp_server):
    """A group given the MCP server's ``order_toner`` (writing), and nothing else."""
    staff = staff_page()
    office = register(staff, mcp_server, prefix="facilities")
    group = Group.objects.create(name=f"toner-buyers-{office.pk}")
    give(staff, office, "order_toner", writes=True, groups=[group])
    yield group
    group.delete()
    office.delete()


def _asked(browser, profile, title: str, user=None):
    """A conversation titled ``title`` of ``user`` (a new person if none), open in a page that has just sent
    a question."""
    user = user or make_user()
    conversation = Conversation.objects.create(
        owner=user, profile=profile, title=title, tools_enabled=True, thinking_enabled=False
    )
    page = browser.new_page()
    log_in(page, user)
    page.goto(f"{base_url()}/c/{conversation.id}/")
    page.wait_for_function("() => document.getElementById('chat').dataset.connected === '1'")
    page.fill("#prompt", "Use the tool.")
    page.keyboard.press("Enter")
    return conversation, page


def _waiting_step(page):
    """The answer's first tool step, once it waits for its person."""
    step = page.locator("article.message.assistant .tool-step").first
    expect(step).to_have_attribute("data-state", "waiting", timeout=120_000)
    return step


def _decide(page, step, button: str, state: str) -> None:
    """``button`` clicked on the waiting ``step``; returns once the step shows ``state`` and the answer completed."""
    step.get_by_role("button", name=button).click()
    expect(step).to_have_attribute("data-state", state, timeout=60_000)
    expect(step.locator(".tool-approval")).to_be_hidden()
    answer = page.locator("article.message.assistant").last
    expect(answer).to_have_attribute("data-status", "complete", timeout=120_000)


def _stored_and_shown_again(page, conversation, state: str) -> list[dict]:
    """The answer's steps as stored (one, in ``state``), once the page opened again shows it so."""
    stored = Message.objects.filter(conversation=conversation, role="assistant").get()
    assert [s["state"] for s in stored.tool_steps] == [state]
    page.reload()
    expect(page.locator("article.message.assistant .tool-step").first).to_have_attribute("data-state", state)
    return stored.tool_steps


@pytest.mark.parametrize(("button", "state", "ran"), [("Allow", "done", True), ("Deny", "denied", False)])
def test_allow_and_deny_in_the_page_decide_whether_a_writing_tool_runs(profile, browser, button, state, ran):
    conversation, page = _asked(browser, profile, "tool:write_note")
    try:
        expect(page.locator("#tools-enabled")).to_be_checked()
        step = _waiting_step(page)
        assert not notes_file(conversation.id).exists()  # nothing runs before the click
        _decide(page, step, button, state)
        assert notes_file(conversation.id).exists() is ran
        _stored_and_shown_again(page, conversation, state)
    finally:
        page.close()


@pytest.mark.parametrize(
    ("button", "state", "result", "runs"),
    [("Allow", "done", "Toner ordered for floor 3.", 1), ("Deny", "denied", DENIED, 0)],
)
def test_allow_and_deny_in_the_page_decide_whether_a_real_mcp_servers_writing_tool_runs(
    profile, toner_buyers, mcp_server, llama_server, browser, button, state, result, runs
):
    person = make_user()
    person.groups.add(toner_buyers)
    orders = mcp_server.state()["toner_orders"]
    conversation, page = _asked(browser, profile, "Toner", person)
    try:
        step = _waiting_step(page)
        expect(step.locator(".tool-name")).to_have_text("order_toner")
        # While it waits: not run on the server, and llama-server's slot free (no grant held either).
        assert mcp_server.state()["toner_orders"] == orders
        assert off_the_loop(lambda: slot_free(llama_server, profile))
        _decide(page, step, button, state)
        expect(step.locator(".tool-result")).to_have_text(result)
        assert mcp_server.state()["toner_orders"] == orders + runs  # the server ran it only when allowed
        [stored] = _stored_and_shown_again(page, conversation, state)
        assert (stored["name"], stored["result"]) == ("order_toner", result)
    finally:
        page.close()


def test_a_tool_result_is_rendered_inert_like_model_output(profile, browser):
    _conversation, page = _asked(browser, profile, "tool:hostile")
    try:
        answer = page.locator("article.message.assistant").last
        expect(answer).to_have_attribute("data-status", "complete", timeout=120_000)
        result = answer.locator(".tool-step .tool-result")
        expect(result.locator("strong")).to_have_text("bold")  # Markdown rendered, as model output is
        assert result.locator("script, button, [onerror], [onclick]").count() == 0
        assert page.evaluate("() => window.toolResultRan") is None
    finally:
        page.close()
