"""MCP tools called from a chat turn, every part real: staff register the official SDK's test server
(tests/support/mcp_server.py) on the staff page and give its tools to people and groups; a person's turn
over the chat socket of a real web process goes through the real llama-server serving the wired
``qwen35moe`` model with Qwen3.5's own template (its tool grammar writes the call whole: the tool's one
argument is a constant, or it has none), the tool loop calls the MCP server and the result goes back in
the template's ``<tool_response>``. Each person is given one tool, so the model calls that one. The web
process offers no built-in tools (QWENWEB_TOOL_BUILTINS empty).

Covered: the result goes back and the answer goes on; someone outside the group is not offered the tool;
a writing tool waits for its person with the model's slot free, Deny keeps it from running on the server
and Allow runs it; a tool that fails, one past the time limit, one that answers 50 MB and a server that
is down each end the step as an error whose message the person reads in the page, in the stored step
and that the model reads too, and the answer completes with the slot free."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group

from chat.models import Conversation
from chat.tools.mcp.models import McpServer
from tests.support.client import login, make_user, send, talking_to
from tests.support.mcp_server import FLOOR_STATUS, McpTestServer
from tests.support.mcp_staff import give, register, staff_page
from tests.support.qwen35 import ANSWER, rendered_prompt
from tests.support.stack import second_web_server
from tests.support.tool_stack import tools_profile
from tests.support.tool_turns import shown_steps, slot_free, turn

TOOL_TIMEOUT_S = 8  # the slow tool's turn waits it out; an MCP call that answers takes well under a second


@pytest.fixture(scope="module")
def mcp_server():
    server = McpTestServer()
    yield server
    server.release()  # a slow tool call that still waits there, if any
    server.stop()


@pytest.fixture(scope="module")
def profile(llama_server, redis_server, run_dir):
    settings = {
        "QWENWEB_TOOL_BUILTINS": "",
        "QWENWEB_TOOL_STEP_LIMIT": "1",
        "QWENWEB_TOOL_TIMEOUT_S": str(TOOL_TIMEOUT_S),
    }
    with second_web_server("daphne-mcp-chat", run_dir, settings) as url, talking_to(url.rsplit(":", 1)[1]):
        with tools_profile() as profile:
            yield profile


@pytest.fixture(scope="module")
def staff():
    return staff_page()


@pytest.fixture(scope="module")
def office(mcp_server, staff):
    """The server registered through the staff page, its tools listed."""
    server = register(staff, mcp_server, prefix="facilities")
    yield server
    server.delete()


@pytest.fixture(scope="module")
def facilities(office, staff):
    """A group given ``floor_status`` (reading)."""
    group = Group.objects.create(name=f"facilities-{office.pk}")
    give(staff, office, "floor_status", writes=False, groups=[group])
    yield group
    group.delete()


@pytest.fixture
def server_down(staff):
    """A second test server, registered while it ran (its tools listed), then stopped."""
    running = McpTestServer()
    try:
        server = register(staff, running, prefix="basement")
    finally:
        running.stop()
    yield server
    server.delete()


def _conversation(person, profile) -> Conversation:
    return Conversation.objects.create(owner=person, profile=profile, tools_enabled=True, thinking_enabled=False)


def _person_with(staff, server: McpServer, tool: str, *, writes: bool = False):
    person = make_user()
    give(staff, server, tool, writes=writes, users=[person])
    return person


def test_a_group_members_turn_calls_the_mcp_tool_and_the_answer_goes_on_from_its_result(
    profile, facilities, mcp_server, llama_server
):
    member = make_user()
    member.groups.add(facilities)
    calls = mcp_server.state()["floor_calls"]
    events, message = turn(login(member), _conversation(member, profile), text="Which printers work on floor 3?")
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    assert [(step["name"], step["state"]) for step in shown_steps(events)] == [("floor_status", "done")]
    assert mcp_server.state()["floor_calls"] == calls + 1  # the MCP server ran it, once
    [step] = message.tool_steps
    assert (step["name"], step["state"]) == ("floor_status", "done")
    assert json.loads(step["arguments"]) == {"floor": 3}
    assert step["result"] == f"{FLOOR_STATUS} (floor 3)"
    # The MCP result went back to the model in Qwen3.5's template, and the answer went on after it.
    prompt = rendered_prompt(llama_server, profile, FLOOR_STATUS)
    assert f"<tool_response>\n{FLOOR_STATUS} (floor 3)\n</tool_response>" in prompt
    assert message.content.endswith(ANSWER) and message.status == "complete"


def test_someone_outside_the_group_is_not_offered_the_tool(profile, facilities, mcp_server):
    outsider = make_user()
    calls = mcp_server.state()["floor_calls"]
    events, message = turn(login(outsider), _conversation(outsider, profile), text="Which printers work on floor 3?")
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    assert not [event for event in events if event["type"] == "tool"]
    assert message.tool_steps in (None, [])
    assert mcp_server.state()["floor_calls"] == calls
    assert message.content.endswith(ANSWER)


@pytest.mark.parametrize("allow", [False, True], ids=["deny", "allow"])
def test_a_writing_mcp_tool_waits_for_its_person_with_the_slot_free_and_runs_only_when_allowed(
    profile, office, staff, mcp_server, llama_server, allow
):
    person = _person_with(staff, office, "order_toner", writes=True)
    conversation = _conversation(person, profile)
    orders = mcp_server.state()["toner_orders"]
    while_waiting = []

    def decide(ws, step):
        if step["state"] == "waiting":
            while_waiting.append((slot_free(llama_server, profile), mcp_server.state()["toner_orders"]))
            send(ws, type="tool_decision", conversation=str(conversation.id), step=step["id"], allow=allow)

    events, message = turn(login(person), conversation, decide)
    assert while_waiting == [(True, orders)]  # it waited with no slot held, and had not run
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    if allow:
        expected = ("done", "Toner ordered for floor 3.")
    else:
        expected = ("denied", "You denied this tool call, so it did not run.")
    assert [(step["state"], step["result"]) for step in shown_steps(events)] == [expected]
    assert [(step["state"], step["result"]) for step in message.tool_steps] == [expected]
    assert mcp_server.state()["toner_orders"] == orders + allow  # the server ran it only when allowed
    assert message.content.endswith(ANSWER) and message.status == "complete"
    assert slot_free(llama_server, profile)


FAILURES = {
    # A crash's own text stays on the server (the SDK sends only the tool's name).
    "broken_tool": lambda server: "The tool broken_tool failed: Error executing tool broken_tool",
    # The MCP client keeps the limit itself and names its server (the loop cuts a second later).
    "slow_lookup": lambda server: f"The tool server {server.name} did not answer within {TOOL_TIMEOUT_S} s.",
    "huge_result": lambda server: (
        f"The tool server {server.name} sent more than 1.0 MB; the answer was not read further."
    ),
    "server_down": lambda server: f"The tool server {server.name} could not be reached.",
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_an_mcp_tool_that_breaks_hangs_answers_50_mb_or_is_down_ends_as_an_error_the_person_reads(
    request, profile, staff, mcp_server, llama_server, failure
):
    server = request.getfixturevalue("server_down" if failure == "server_down" else "office")
    person = _person_with(staff, server, "floor_status" if failure == "server_down" else failure)
    slow_calls = mcp_server.state()["slow_calls"]
    events, message = turn(login(person), _conversation(person, profile))
    expected = FAILURES[failure](server)
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    assert [(step["state"], step["result"]) for step in shown_steps(events)] == [("error", expected)]
    assert [(step["state"], step["result"]) for step in message.tool_steps] == [("error", expected)]
    # The model read the same message, and the answer went on after it.
    assert f"<tool_response>\n{expected}\n</tool_response>" in rendered_prompt(llama_server, profile, expected)
    assert message.content.endswith(ANSWER) and message.status == "complete"
    assert slot_free(llama_server, profile)
    if failure == "slow_lookup":  # the call reached the tool, and the loop's limit cut it
        assert mcp_server.state()["slow_calls"] == slow_calls + 1
