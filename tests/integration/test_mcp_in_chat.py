"""An MCP tool called from a chat turn, every part real: staff register the official SDK's test server
(tests/support/mcp_server.py) on the staff page and give one of its tools to a group; a member's turn
over the chat socket of a real web process goes through the real llama-server serving the wired
``qwen35moe`` model with Qwen3.5's own template (its tool grammar writes the call whole: the tool's one
argument is a constant), the tool loop calls the MCP server and the result goes back in the template's
``<tool_response>``. Someone outside the group is not offered the tool at all. The web process offers
no built-in tools (QWENWEB_TOOL_BUILTINS empty), so the MCP tool is the only one the model may call."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from chat.models import Conversation, Message
from chat.tools.mcp.models import McpServer, McpTool
from tests.support.client import chat_socket, login, make_user, send, talking_to
from tests.support.mcp_server import FLOOR_STATUS, McpTestServer
from tests.support.qwen35 import ANSWER, rendered_prompt
from tests.support.stack import second_web_server
from tests.support.tool_stack import tools_profile


@pytest.fixture(scope="module")
def mcp_server():
    server = McpTestServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def profile(llama_server, redis_server, run_dir):
    settings = {"QWENWEB_TOOL_BUILTINS": "", "QWENWEB_TOOL_STEP_LIMIT": "1"}
    with second_web_server("daphne-mcp-chat", run_dir, settings) as url, talking_to(url.rsplit(":", 1)[1]):
        with tools_profile() as profile:
            yield profile


@pytest.fixture(scope="module")
def facilities(mcp_server):
    """The server registered through the staff page, ``floor_status`` given (reading) to a group."""
    staff = Client(SERVER_NAME="127.0.0.1")
    staff.force_login(make_user(is_staff=True))
    name = f"facilities-{uuid.uuid4().hex[:6]}"
    headers = f"Authorization: Bearer {mcp_server.secret}"
    answer = staff.post("/staff/tools/new/", {"name": name, "url": mcp_server.url, "enabled": "on", "headers": headers})
    assert answer.status_code == 302
    server = McpServer.objects.get(name=name)
    group = Group.objects.create(name=f"facilities-{server.pk}")
    tool = McpTool.objects.get(server=server, name="floor_status")
    posted = {"enabled": "on", "writes": "0", "users": [], "groups": [group.pk]}
    assert staff.post(f"/staff/tools/{server.pk}/t/{tool.pk}/", posted).status_code == 302
    yield group
    server.delete()


def _turn(user, profile) -> tuple[list[dict], Message]:
    conversation = Conversation.objects.create(owner=user, profile=profile, tools_enabled=True, thinking_enabled=False)
    with chat_socket(login(user)) as ws:
        send(ws, type="send", conversation=str(conversation.id), text="Which printers work on floor 3?")
        events = []
        while not events or events[-1]["type"] not in ("done", "error"):
            events.append(json.loads(ws.recv(timeout=120)))
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    accepted = next(event for event in events if event["type"] == "accepted")
    return events, Message.objects.get(id=accepted["assistant_message"]["id"])


def test_a_group_members_turn_calls_the_mcp_tool_and_the_answer_goes_on_from_its_result(
    profile, facilities, mcp_server, llama_server
):
    member = make_user()
    member.groups.add(facilities)
    calls = mcp_server.state()["floor_calls"]
    events, message = _turn(member, profile)
    shown = [event["step"] for event in events if event["type"] == "tool"]
    assert [(step["name"], step["state"]) for step in shown][-1] == ("floor_status", "done")
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
    events, message = _turn(outsider, profile)
    assert not [event for event in events if event["type"] == "tool"]
    assert message.tool_steps in (None, [])
    assert mcp_server.state()["floor_calls"] == calls
    assert message.content.endswith(ANSWER)
