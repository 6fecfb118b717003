"""An answer that outlives its node (issue 52): two real nodes serving one pool (the main box's router and
a second node's, tests/support/nodes.py), the one writing an answer killed (SIGKILL) or cut off (SIGSTOP)
while the other node's slot is held by the test (tests/support/hold.py), so where the answer is and
when it may move is the test's to say, never the model's speed. The answer goes on from its text so
far, each word once, stored as one message with its resume noted; a Stop during the pause ends it; a
node with another model file never takes it; a node marked out of the pool releases it at once."""

from __future__ import annotations

import asyncio
import os
import signal

import psutil
import pytest
from django.conf import settings
from django.core.management import call_command

from chat.models import DailyUsage, Message, UsageRecord
from monitor.models import Node, ServerProfile
from monitor.serving.slot import load_on_nodes
from tests.integration.test_pool import POOL, _hold_slots, grants, pool, second_node, serving  # noqa: F401
from tests.support.client import chat_socket, events_until, login, make_user, send, text_of
from tests.support.profiles import live_id_here
from tests.support.stack import wait_until

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")
LONG = {"seed": 2, "max_tokens": 80}  # the pool's answers run to their max_tokens (--ignore-eos)


@pytest.fixture(scope="module")
def registered(pool, second_node):  # noqa: F811
    """The main box's model files registered with their SHA256, as `make run` does (node-b did at its join)."""
    call_command("register_node")
    ours = Node.objects.get(name=settings.NODE_NAME).registered_models
    model = ServerProfile.objects.get(name=POOL).model_file
    assert ours[model] and Node.objects.get(name=second_node.name).registered_models[model] == ours[model]
    return pool


def _answer_on(ws, node_held: list[str]) -> tuple[dict, list[dict], object]:
    """A long answer begun on the node whose slot is not held; the holder is returned, still holding."""
    holder = _hold_slots(node_held)
    send(ws, type="send", text="Write a long story.", options=LONG, profile=POOL)
    accepted = events_until(ws, "accepted")[-1]
    return accepted, events_until(ws, "token", timeout=300), holder


def _back(pool_nodes: list[str], second) -> None:
    wait_until(lambda: second.name in serving(pool_nodes), 240, "the second node back in the pool")


def test_a_node_killed_mid_answer_its_answer_goes_on_on_the_other_node(registered, second_node):  # noqa: F811
    person = make_user()
    http = login(person)
    with chat_socket(http) as ws:
        accepted, before, holder = _answer_on(ws, [settings.NODE_NAME])
        assert grants()[-1].node == second_node.name
        second_node.kill_router()
        holder.release()  # the main box's slot free only now: the answer can only go on there
        after = events_until(ws, timeout=300)
    done = after[-1]
    assert done["status"] == "complete", done
    assert [event["node"] for event in after if event["type"] == "resumed"] == [settings.NODE_NAME]
    answer = Message.objects.get(id=accepted["assistant_message"]["id"])
    assert answer.content == text_of(before + after)  # one message, what the person saw, each word once
    assert answer.content.startswith(text_of(before)) and len(answer.content) > len(text_of(before))
    assert [note["node"] for note in answer.stats["resumed"]] == [settings.NODE_NAME]
    roles = Message.objects.filter(conversation_id=accepted["conversation"]).values_list("role", flat=True)
    assert list(roles) == ["user", "assistant"]
    # The cut stream's tokens count too: the ledger's row has all 80 written (the resumed stream was asked
    # for the rest), its prompt the cut stream's besides the resumed one's, and the quota the same sum.
    [note] = answer.stats["resumed"]
    assert note["cut_output"] == note["written"] > 0 and note["cut_prompt"] > 0
    row = UsageRecord.objects.get(user=person)
    assert row.output_tokens == LONG["max_tokens"] == answer.stats["output_tokens"] + note["cut_output"]
    resumed_prompt = answer.stats["prompt_tokens"] + answer.stats["cached_tokens"]
    assert row.prompt_tokens == resumed_prompt + note["cut_prompt"]
    assert DailyUsage.objects.get(user=person).tokens == row.prompt_tokens + row.output_tokens
    _back(registered, second_node)


def test_a_stop_pressed_while_the_answer_waits_for_a_node_ends_it_and_nothing_resumes(registered, second_node):  # noqa: F811
    http = login(make_user())
    with chat_socket(http) as ws:
        accepted, before, holder = _answer_on(ws, [settings.NODE_NAME])
        granted = len(grants())
        second_node.kill_router()
        try:
            told = events_until(ws, "notice", timeout=120)  # waiting: the main box's slot is held
            send(ws, type="stop", conversation=accepted["conversation"])
            after = events_until(ws, timeout=120)
        finally:
            holder.release()
    assert "goes on as soon as a server can take it" in told[-1]["text"]
    assert after[-1]["status"] == "stopped" and not [e for e in after if e["type"] == "resumed"]
    _back(registered, second_node)
    assert [grant for grant in grants()[granted:] if grant.user != "test-holder"] == []  # it never took a slot
    answer = Message.objects.get(id=accepted["assistant_message"]["id"])
    assert answer.status == "stopped" and answer.content == text_of(before + told + after)


def test_a_node_with_another_model_file_never_takes_it_the_answer_waits_for_its_own_node(registered, second_node):  # noqa: F811
    """The only node with the answer's model file killed: the person is told, the answer waits (the main
    box, free, has another file), and goes on on that node once it is back, once."""
    node_b = Node.objects.get(name=second_node.name)
    model = ServerProfile.objects.get(name=POOL).model_file
    facts = node_b.facts
    changed = [{**item, "sha256": "0" * 64} if item.get("name") == model else item for item in facts["models"]]
    Node.objects.filter(pk=node_b.pk).update(facts={**facts, "models": changed})
    http = login(make_user())
    try:
        with chat_socket(http) as ws:
            accepted, before, holder = _answer_on(ws, [settings.NODE_NAME])
            holder.release()  # the main box is free from the start of the pause
            second_node.kill_router()
            after = events_until(ws, timeout=300)
    finally:
        Node.objects.filter(pk=node_b.pk).update(facts=facts)
    assert any(e["type"] == "notice" and "goes on as soon" in e["text"] for e in after)
    assert after[-1]["status"] == "complete", after[-1]
    assert [event["node"] for event in after if event["type"] == "resumed"] == [second_node.name]
    answer = Message.objects.get(id=accepted["assistant_message"]["id"])
    assert answer.content == text_of(before + after)


def test_a_node_the_pool_marks_out_releases_its_answer_at_once(registered, second_node):  # noqa: F811
    """node-b's router frozen (SIGSTOP) mid-answer, the profile's hang limit far away: its heartbeat stops
    saying it serves, and that alone moves the answer to the main box; node-b, back, does not get it."""
    ServerProfile.objects.filter(name=POOL).update(hang_limit_s=3600)
    http = login(make_user())
    router = second_node.router_pid()
    try:
        with chat_socket(http) as ws:
            accepted, before, holder = _answer_on(ws, [settings.NODE_NAME])
            holder.release()
            os.kill(router, signal.SIGSTOP)
            moved = events_until(ws, "resumed", timeout=300)
            # Moved while node-b's router is still there, frozen: the pool's mark did it, not a restart.
            assert psutil.Process(router).status() == psutil.STATUS_STOPPED
            after = moved + events_until(ws, timeout=300)
    finally:
        ServerProfile.objects.filter(name=POOL).update(hang_limit_s=20)
        if psutil.pid_exists(router):
            os.kill(router, signal.SIGCONT)
    assert after[-1]["status"] == "complete", after[-1]
    assert [event["node"] for event in after if event["type"] == "resumed"] == [settings.NODE_NAME]
    answer = Message.objects.get(id=accepted["assistant_message"]["id"])
    assert answer.content == text_of(before + after)
    _back(registered, second_node)


def test_two_nodes_dying_one_after_the_other_the_answer_goes_on_twice(registered, second_node, llama_server):  # noqa: F811
    """node-b killed mid-answer: it goes on on the main box; the main box's instance killed in turn as soon
    as it took it: it goes on on node-b, back by then. One message, each word once, both resumes noted."""
    http = login(make_user())
    with chat_socket(http) as ws:
        accepted, before, holder = _answer_on(ws, [settings.NODE_NAME])
        second_node.kill_router()
        holder.release()
        first = events_until(ws, "resumed", timeout=300)
        assert first[-1]["node"] == settings.NODE_NAME
        os.kill(llama_server.instance_pid(live_id_here(ServerProfile.objects.get(name=POOL))), signal.SIGKILL)
        after = events_until(ws, timeout=300)
    assert after[-1]["status"] == "complete", after[-1]
    assert [event["node"] for event in after if event["type"] == "resumed"] == [second_node.name]
    answer = Message.objects.get(id=accepted["assistant_message"]["id"])
    assert answer.content == text_of(before + first + after)
    assert [note["node"] for note in answer.stats["resumed"]] == [settings.NODE_NAME, second_node.name]
    asyncio.run(load_on_nodes(ServerProfile.objects.get(name=POOL), [settings.NODE_NAME]))  # no watchdog here
    wait_until(lambda: len(serving(registered)) == 2, 240, "the pool on both nodes again")
