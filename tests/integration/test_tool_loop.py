"""The tool loop of a chat turn with real parts: the wired ``qwen35moe`` model with Qwen3.5's own
template served by the real llama-server (its tool-call parser reads the calls; its tool grammar
writes each test tool's constant arguments; the profile's --grammar writes the answer once the loop
asks for no more tools), the real WebSocket of a web process that offers the test tools
(tests/support/tool_provider.py) and those staff give of the real MCP test server (tests/support/mcp_server.py),
the real fair queue. Step limit 1: the wired model calls a tool whenever it may, so each turn makes one
call and then answers without tools; one test runs a second web process with a limit of 3, so one answer
makes three steps.
"""

from __future__ import annotations

import json
import re

import httpx
import pytest

from chat.models import Conversation
from tests.support import mcp_staff
from tests.support.client import chat_socket, events_until, login, make_user, send
from tests.support.mcp_server import McpTestServer
from tests.support.profiles import live_id_here
from tests.support.qwen35 import ANSWER, rendered_prompt
from tests.support.tool_provider import notes_file, release_file
from tests.support.tool_stack import tool_web_server, tools_profile
from tests.support.tool_turns import prompt_tokens_of_one_step_turn, shown_steps, slot_free, turn

STEP_LIMIT = 1
APPROVAL_TIMEOUT_S = 20  # the tests that answer do so as the step shows; one lets it run out
LIMIT_NOTICE = "The model reached the limit of 1 tool call in one answer, so it answered without more tools."


@pytest.fixture(scope="module")
def profile(llama_server, redis_server, run_dir):
    settings = {"QWENWEB_TOOL_STEP_LIMIT": str(STEP_LIMIT), "QWENWEB_TOOL_APPROVAL_TIMEOUT_S": str(APPROVAL_TIMEOUT_S)}
    with tool_web_server(run_dir, **settings), tools_profile() as profile:
        yield profile


def _conversation(tool: str, profile, **fields):
    user = make_user()
    conversation = Conversation.objects.create(
        owner=user, profile=profile, title=f"tool:{tool}", tools_enabled=True, thinking_enabled=False, **fields
    )
    return user, login(user), conversation


def test_calculator_result_goes_back_and_the_step_limit_ends_with_an_answer(profile, llama_server):
    _user, http, conversation = _conversation("calculator", profile)
    events, message = turn(http, conversation)
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    steps = shown_steps(events)
    assert [(s["name"], s["state"], s["result"]) for s in steps] == [("calculator", "done", "42")]
    assert json.loads(steps[0]["arguments"]) == {"n": 7}
    # The result went back to the model in Qwen3.5's own template, and the answer went on after it.
    prompt = rendered_prompt(llama_server, profile, "<tool_response>")
    assert "<tool_response>\n42\n</tool_response>" in prompt and "<tools>" in prompt
    notices = [event["text"] for event in events if event["type"] == "notice"]
    assert any("limit of 1 tool call " in text for text in notices), notices
    # Kept with the answer: a page loaded again, and the export, say why the model called no more tools.
    assert message.error == LIMIT_NOTICE and events[-1]["error"] == LIMIT_NOTICE
    assert LIMIT_NOTICE in http.get(f"/c/{conversation.id}/").text
    assert LIMIT_NOTICE in http.get(f"/c/{conversation.id}/export.md").text
    assert message.content.endswith(ANSWER) and message.status == "complete"
    assert [(s["name"], s["state"], s["result"]) for s in message.tool_steps] == [("calculator", "done", "42")]
    assert message.stats["tool_steps"] == 1
    # Stored with the answer: the export carries the steps.
    exported = http.get(f"/c/{conversation.id}/export.json").json()
    assert [s["result"] for s in exported["messages"][-1]["tool_steps"]] == ["42"]
    assert "calculator" in http.get(f"/c/{conversation.id}/export.md").text


def test_a_writing_tool_waits_with_the_slot_free_and_deny_keeps_it_from_running(profile, llama_server):
    _user, http, conversation = _conversation("write_note", profile)
    seen_waiting = []

    def deny(ws, step):
        if step["state"] == "waiting":
            seen_waiting.append(slot_free(llama_server, profile))
            send(ws, type="tool_decision", conversation=str(conversation.id), step=step["id"], allow=False)

    events, message = turn(http, conversation, deny)
    assert seen_waiting == [True]  # it waited for its person with no slot held
    assert [s["state"] for s in message.tool_steps] == ["denied"]
    assert "denied" in message.tool_steps[0]["result"]
    assert not notes_file(conversation.id).exists()
    assert message.status == "complete" and message.content.endswith(ANSWER)


def test_allow_runs_the_writing_tool(profile):
    _user, http, conversation = _conversation("write_note", profile)

    def allow(ws, step):
        if step["state"] == "waiting":
            send(ws, type="tool_decision", conversation=str(conversation.id), step=step["id"], allow=True)

    _events, message = turn(http, conversation, allow)
    assert [s["state"] for s in message.tool_steps] == ["done"]
    assert notes_file(conversation.id).read_text() == "note 1\n"


def test_a_slow_tool_holds_no_slot_and_a_page_that_comes_back_sees_it(profile, llama_server):
    _user, http, conversation = _conversation("slow", profile)
    checks = []

    def while_running(ws, step):
        if step["state"] == "running" and not checks:
            checks.append(slot_free(llama_server, profile))
            with chat_socket(http) as other:  # another tab opens now
                send(other, type="subscribe", conversation=str(conversation.id))
                snapshot = json.loads(other.recv(timeout=30))
            checks.append([(s["name"], s["state"]) for s in snapshot["tool_steps"]])
            release_file(conversation.id).touch()

    events, message = turn(http, conversation, while_running)
    assert checks == [True, [("slow", "running")]]
    assert events[-1]["status"] == "complete"
    assert [s["state"] for s in message.tool_steps] == ["done"]


@pytest.mark.parametrize("tool", ["slow", "write_note"])
def test_stop_while_a_tool_runs_or_waits_ends_the_answer_with_the_step_stopped(profile, llama_server, tool):
    _user, http, conversation = _conversation(tool, profile)

    def stop(ws, step):
        if step["state"] in ("running", "waiting"):
            send(ws, type="stop", conversation=str(conversation.id))

    events, message = turn(http, conversation, stop)
    assert events[-1]["status"] == "stopped"
    assert [s["state"] for s in message.tool_steps] == ["stopped"]
    assert message.status == "stopped"
    assert slot_free(llama_server, profile)
    assert not notes_file(conversation.id).exists()


@pytest.mark.parametrize(
    ("tool", "message_part"),
    [
        ("hang", "did not answer within 2 seconds"),
        ("broken", "The tool failed"),
        ("strict", "arguments were not valid"),
    ],
)
def test_a_tool_that_hangs_breaks_or_gets_bad_arguments_is_an_error_the_person_reads(profile, tool, message_part):
    _user, http, conversation = _conversation(tool, profile)
    events, message = turn(http, conversation)
    assert events[-1]["status"] == "complete"
    assert [s["state"] for s in message.tool_steps] == ["error"]
    assert message_part in message.tool_steps[0]["result"]
    assert message.content.endswith(ANSWER)


def test_a_writing_tool_nobody_answers_does_not_run_once_its_time_is_up(profile, llama_server):
    _user, http, conversation = _conversation("write_note", profile)
    events, message = turn(http, conversation)
    assert [s["state"] for s in shown_steps(events)] == ["denied"]
    assert f"within {APPROVAL_TIMEOUT_S} seconds" in message.tool_steps[0]["result"]
    assert not notes_file(conversation.id).exists() and message.status == "complete"
    assert slot_free(llama_server, profile)


def test_a_result_of_50_mb_is_cut_before_it_reaches_the_model_the_page_or_the_row(profile):
    _user, http, conversation = _conversation("huge", profile)
    events, message = turn(http, conversation)
    step = message.tool_steps[0]
    assert step["state"] == "done" and step["result"].startswith("x" * 1000)
    assert len(step["result"]) < 16_200 and step["result"].endswith("cut to 16000 characters.]")
    assert max(len(json.dumps(event)) for event in events) < 20_000
    assert message.status == "complete" and message.content.endswith(ANSWER)


def test_a_step_goes_back_as_the_model_wrote_it_so_the_follow_up_finds_its_prompt_cached(profile, llama_server):
    """The follow-up request's prompt, rendered by the real llama-server with Qwen3.5's own template, starts
    with the step's prompt and what the model wrote in it, its thought included: the prefix llama-server's
    cache holds. (The wired model cannot think and call in one step, so the step's output is written here
    as Qwen3.5 writes it.) Without the thought the template renders an empty one, and the whole step is
    computed again."""
    import httpx

    from chat.tools.builtin import CALCULATOR
    from chat.tools.calls import ToolCall
    from chat.tools.loop import step_messages

    def rendered(messages: list[dict]) -> str:
        body = {"model": live_id_here(profile), "messages": messages, "tools": [CALCULATOR.openai_tool()]}
        answer = httpx.post(llama_server.url + "/apply-template", json=body, headers=llama_server.headers, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()["prompt"]

    asked = [{"role": "user", "content": "What is six times seven?"}]
    call = ToolCall(id="call-1", name="calculator", arguments='{"expression": "6*7"}')
    thought = "Six times seven: the calculator is exact."
    written = (
        f"{thought}\n</think>\n\n<tool_call>\n<function=calculator>\n<parameter=expression>\n6*7\n"
        "</parameter>\n</function>\n</tool_call>"
    )
    step_prompt = rendered(asked)
    assert step_prompt.endswith("<|im_start|>assistant\n<think>\n")
    follow_up = rendered(asked + step_messages("", thought, call, "42"))
    assert follow_up.startswith(step_prompt + written), follow_up[len(step_prompt) :]
    assert follow_up.endswith("<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n")


def test_the_follow_up_finds_the_step_s_prompt_and_the_call_in_llama_server_s_cache(profile):
    """A ``nap`` turn, whose call the wired model writes in its tokenizer's tokens as a trained model
    does: the follow-up request takes from llama-server's cache the first step's whole prompt and the
    call, on this hybrid model too (the slot's recurrent state is at the call's end), and reads only the
    tool's result and the template's lines around it."""
    _user, http, conversation = _conversation("nap", profile)
    events, message = turn(http, conversation)
    assert message.status == "complete", events[-3:]
    first_prompt, cached, followup_prompt = prompt_tokens_of_one_step_turn(events)
    assert first_prompt < cached < followup_prompt, events[-1]["stats"]


def _token_count(llama_server, profile, text: str) -> int:
    body = {"model": live_id_here(profile), "content": text}
    answer = httpx.post(llama_server.url + "/tokenize", json=body, headers=llama_server.headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return len(answer.json()["tokens"])


def test_three_steps_in_one_answer_each_go_back_to_the_model_then_the_limit_ends_them(profile, llama_server, run_dir):
    """A web process with a step limit of 3 (started for this test alone, on the module's profile): the
    ``tally`` tool is called three times in one answer, each step shown and stored in order with its own
    result, then the limit's notice and the answer. The last request llama-server rendered carries every
    step's call and result in order, and the answer's stats sum the prompts of all four requests."""
    limit_notice = "The model reached the limit of 3 tool calls in one answer, so it answered without more tools."
    with tool_web_server(run_dir, QWENWEB_TOOL_STEP_LIMIT="3"):
        _user, http, conversation = _conversation("tally", profile)
        question = f"Count three times ({conversation.id})."
        events, message = turn(http, conversation, text=question)
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    expected = [("tally", "done", f"tally {k}") for k in (1, 2, 3)]
    shown = shown_steps(events)
    assert [(s["name"], s["state"], s["result"]) for s in shown] == expected
    assert all(json.loads(s["arguments"]) == {"n": 1} for s in shown)
    # Shown in order: each step ends before the next begins, and the notice comes after the last.
    kinds = [(e["type"], e["step"]["id"] if e["type"] == "tool" else None) for e in events]
    tool_ids = [step_id for kind, step_id in kinds if kind == "tool"]
    assert tool_ids == sorted(tool_ids, key=[s["id"] for s in shown].index)
    notices = [i for i, (kind, _id) in enumerate(kinds) if kind == "notice"]
    assert notices and notices[-1] > max(i for i, (kind, _id) in enumerate(kinds) if kind == "tool")
    assert events[notices[-1]]["text"] == limit_notice
    # Stored with the answer, in the same order, with the same ids.
    assert [(s["name"], s["state"], s["result"]) for s in message.tool_steps] == expected
    assert [s["id"] for s in message.tool_steps] == [s["id"] for s in shown]
    assert message.status == "complete" and message.content.endswith(ANSWER) and message.error == limit_notice
    # What llama-server rendered for the last request: each call, then its result, in order.
    prompt = rendered_prompt(llama_server, profile, "<tool_response>\ntally 3\n</tool_response>")
    assert question in prompt and "<tools>" in prompt
    rendered = re.findall(
        r"<tool_call>\n<function=(\w+)>\n<parameter=n>\n(\d+)\n</parameter>\n</function>\n</tool_call>"
        r"|<tool_response>\n(.*?)\n</tool_response>",
        prompt,
        re.S,
    )
    steps_back = [("call", name, argument) if name else ("result", result) for name, argument, result in rendered]
    assert steps_back == [
        ("call", "tally", "1"), ("result", "tally 1"),
        ("call", "tally", "1"), ("result", "tally 2"),
        ("call", "tally", "1"), ("result", "tally 3"),
    ]  # fmt: skip
    # The stats count every request: the first (the question alone), one after each step, the last one's
    # prompt being the one above. Each earlier prompt is the last one cut after its step, with the same ending.
    stats = events[-1]["stats"]
    assert stats["tool_steps"] == 3 and message.stats["tool_steps"] == 3
    step_ends = [m.end() for m in re.finditer(r"</tool_response><\|im_end\|>\n", prompt)]
    ending = prompt[step_ends[-1] :]
    assert ending.startswith("<|im_start|>assistant\n"), ending
    cuts = [prompt.index("<|im_start|>assistant\n")] + step_ends[:-1]
    requests = [prompt[:cut] + ending for cut in cuts] + [prompt]
    counts = [_token_count(llama_server, profile, text) for text in requests]
    followup = stats["followup"]
    assert followup["prompt_tokens"] + followup["cached_tokens"] == counts[-1], (stats, counts)
    assert stats["prompt_tokens"] + stats["cached_tokens"] == sum(counts), (stats, counts)


def test_another_person_s_decision_for_a_waiting_step_is_refused_and_the_tool_does_not_run(profile):
    _user, http, conversation = _conversation("write_note", profile)
    stranger, refused = login(make_user()), []

    def stranger_allows_then_owner_denies(ws, step):
        if step["state"] == "waiting":
            with chat_socket(stranger) as other:  # the step's id, over the stranger's own socket
                send(other, type="tool_decision", conversation=str(conversation.id), step=step["id"], allow=True)
                refused.append(events_until(other, "error", timeout=30)[-1]["message"])
            send(ws, type="tool_decision", conversation=str(conversation.id), step=step["id"], allow=False)

    _events, message = turn(http, conversation, stranger_allows_then_owner_denies)
    assert refused == ["This tool call no longer waits for an answer."]
    assert [s["state"] for s in message.tool_steps] == ["denied"]
    assert not notes_file(conversation.id).exists() and message.status == "complete"


def test_the_tools_switch_is_its_owner_s_and_off_no_tools_reach_llama_server(profile, llama_server):
    """The page's Tools switch posted as the owner, refused to another person; then a turn of a conversation
    whose tool the wired model would call: llama-server renders no tools, and no step is made."""
    user = make_user()
    conversation = Conversation.objects.create(
        owner=user, profile=profile, title="tool:calculator", thinking_enabled=False
    )
    owner, stranger = login(user), login(make_user())

    def switch(http, on: bool):
        page = http.get(f"/c/{conversation.id}/" if http is owner else "/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        data = {"csrfmiddlewaretoken": token, **({"tools": "on"} if on else {})}
        return http.post(f"/c/{conversation.id}/tools/", data=data)

    assert 'id="tools-enabled" checked' in switch(owner, True).text
    assert switch(stranger, False).status_code == 404
    conversation.refresh_from_db()
    assert conversation.tools_enabled
    assert 'id="tools-enabled" checked' not in switch(owner, False).text
    conversation.refresh_from_db()
    assert not conversation.tools_enabled
    question = f"Tools are off here ({conversation.id})."
    events, message = turn(owner, conversation, text=question)
    assert not [event for event in events if event["type"] == "tool"] and message.tool_steps in (None, [])
    assert message.status == "complete" and message.content.endswith(ANSWER) and not message.error
    assert "<tools>" not in rendered_prompt(llama_server, profile, question)


@pytest.fixture(scope="module")
def floor_tool(profile):
    """The MCP test server registered on the staff page; its ``floor_status`` tool enabled, given to no one yet."""
    server_process = McpTestServer()
    staff = mcp_staff.staff_page()
    server = mcp_staff.register(staff, server_process, prefix="facilities")
    tool = mcp_staff.tool(server, "floor_status")
    yield staff, f"/staff/tools/{server.pk}/t/{tool.pk}/", server_process
    server.delete()
    server_process.stop()


def test_a_tool_staff_mark_writing_after_the_turn_offered_it_waits_for_its_person(profile, floor_tool):
    """``floor_status`` is reading when the turn offers it; staff mark it writing while the turn's first request
    waits in the fair queue; when the model calls it, the step waits for Allow, and Deny keeps it from running."""
    staff, tool_page, mcp_server = floor_tool
    user = make_user()
    conversation = Conversation.objects.create(owner=user, profile=profile, tools_enabled=True, thinking_enabled=False)

    def mark(writes: str) -> None:
        answer = staff.post(tool_page, {"enabled": "on", "writes": writes, "users": [user.pk], "groups": []})
        assert answer.status_code == 302

    def deny(ws, step):
        if step["state"] == "waiting":
            send(ws, type="tool_decision", conversation=str(conversation.id), step=step["id"], allow=False)

    mark("0")
    calls = mcp_server.state()["floor_calls"]
    events, message = turn(login(user), conversation, deny, "Which printers work?", while_queued=lambda: mark("1"))
    assert [(s["name"], s["state"]) for s in shown_steps(events)] == [("floor_status", "denied")]
    assert "waiting" in [event["step"]["state"] for event in events if event["type"] == "tool"]
    assert message.tool_steps[0]["writes"] and mcp_server.state()["floor_calls"] == calls
