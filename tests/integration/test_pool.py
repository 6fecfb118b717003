"""One profile served by two nodes: one pool, one line, answers spread over both; follow-ups go back to
the node holding their conversation; a node cut off gets no slots and rejoins by itself. A node killed
mid-answer: tests/integration/test_pool_resume.py (its answer goes on on the other node).

Two real nodes on this machine: the main box's (the ``llama`` fixture's supervisor and router) and a
second one (``tests/support/nodes.py``: its own supervisor, router, worker, var folder and key) against
the same Redis and database. Each node serves the pool with one slot, so two people at once take both.
"""

from __future__ import annotations

import asyncio
import os
import signal

import psutil
import pytest
from django.conf import settings

from monitor.models import Node, Placement, ServerProfile
from monitor.nodes import readiness
from monitor.nodes.registry import local_node
from monitor.profiles.services import save_profile
from monitor.profiles.validation import validate_profile
from monitor.redis_clients import close_loop_clients
from monitor.serving.members import pool_members
from monitor.serving.queue import FairQueue
from monitor.serving.slot import load_on_nodes
from tests.support import queue_state
from tests.support.client import base_url, chat_socket, events_until, login, make_user, send
from tests.support.hold import NodeSlotsHeld, node_slots_held
from tests.support.nodes import SecondNode
from tests.support.stack import wait_until

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")
POOL = "pool"
OPTIONS = {"seed": 4, "max_tokens": 16}


@pytest.fixture(scope="module")
def second_node(run_dir, llama_server, celery_worker):
    node = SecondNode(run_dir, "node-b")
    node.start()
    yield node
    node.stop()


@pytest.fixture(scope="module")
def pool(second_node):
    """The pool profile, placed on both nodes with one slot each, loaded on both."""
    default = ServerProfile.objects.get(is_default=True)
    profile = ServerProfile(
        name=POOL, model_file=default.model_file, chat_template_jinja=default.chat_template_jinja,
        ctx_size=4096, parallel=1, threads=1, load_on_startup=True,
        extra_args="--ignore-eos",  # answers run to their max_tokens: the one killed mid-answer is still running
    )  # fmt: skip
    validate_profile(profile)
    save_profile(profile)
    nodes = [local_node(), Node.objects.get(name=second_node.name)]
    for node in nodes:
        Placement.objects.get_or_create(profile=profile, node=node)
    names = [node.name for node in nodes]
    asyncio.run(load_on_nodes(profile, names))
    wait_until(lambda: len(serving(names)) == 2, 120, "the pool on both nodes")
    yield names
    Placement.objects.filter(profile=profile).delete()
    ServerProfile.objects.filter(pk=profile.pk).delete()


def serving(names: list[str]) -> dict:
    return asyncio.run(readiness.served_on(names, POOL))


def grants() -> list:
    async def read():
        queue = FairQueue(POOL)
        try:
            return await queue_state.grants(queue)
        finally:
            await close_loop_clients()

    return asyncio.run(read())


def ask(http, text: str, conversation: str | None = None) -> tuple[dict, list[dict]]:
    with chat_socket(http) as ws:
        payload = {"type": "send", "text": text, "options": OPTIONS, "profile": POOL}
        if conversation:
            payload["conversation"] = conversation
        send(ws, **payload)
        accepted = events_until(ws, "accepted")[-1]
        return accepted, events_until(ws, timeout=300)


def test_a_pool_streams_to_several_people_at_once_over_both_nodes(pool):
    """Both nodes' slots held (as running answers would), two people ask and wait in the one line;
    the slots are given back together: each waiting answer gets one, on each node, at once."""
    people = [login(make_user()) for _ in range(2)]
    sockets = [chat_socket(http) for http in people]
    holder = _hold_slots(pool)
    try:
        for index, ws in enumerate(sockets):
            send(ws, type="send", text=f"Name a colour ({index}).", options=OPTIONS, profile=POOL)
            places = [event for event in events_until(ws, "queued") if event["type"] == "queued"]
            assert places and places[-1]["position"] == index + 1  # one line for the pool
        before = len(grants())
    finally:
        holder.release()
    results = [events_until(ws, timeout=300)[-1] for ws in sockets]
    for ws in sockets:
        ws.close()
    assert [done["status"] for done in results] == ["complete", "complete"], results
    nodes = {grant.node for grant in grants()[before:] if grant.user != "test-holder"}
    assert nodes == set(pool), nodes  # one slot each: the two answers were on both nodes


def test_a_follow_up_goes_back_to_the_node_that_served_its_conversation(pool):
    """The conversation starts on the node the queue would not pick first (the other one's slot held),
    then every follow-up, with both nodes free, goes back to it: its prompt is cached there."""
    order = list(pool_members(ServerProfile.objects.get(name=POOL)))
    first, last = order[0], order[-1]  # with both free, the queue takes the first of the pool's nodes
    http = login(make_user())
    holder = _hold_slots([first])
    try:
        accepted, _events = ask(http, "Tell me about the sea.")
    finally:
        holder.release()
    assert grants()[-1].node == last
    for round_ in range(2):
        ask(http, f"And more ({round_}).", accepted["conversation"])
        assert grants()[-1].node == last


def _hold_slots(nodes: list[str]) -> NodeSlotsHeld:
    """Hold one slot of the pool on each of ``nodes`` (as running answers would) until released."""
    return node_slots_held(POOL, nodes)


def test_a_node_cut_off_gets_no_slots_and_comes_back_by_itself(pool, second_node):
    """The second node's router frozen (SIGSTOP: a box cut off the network looks the same from here): its
    heartbeat stops saying it serves, the next answer comes from the main box, and the node is back in
    the pool by itself (its supervisor restarts a router that does not answer)."""
    router = second_node.router_pid()
    os.kill(router, signal.SIGSTOP)
    try:
        wait_until(lambda: second_node.name not in serving(pool), 60, "the cut-off node out of the pool")
        again, events = ask(login(make_user()), "Say hi.")
        assert events[-1]["status"] == "complete", events[-1]
        assert grants()[-1].node == settings.NODE_NAME
    finally:
        if psutil.pid_exists(router):
            os.kill(router, signal.SIGCONT)
    wait_until(lambda: second_node.name in serving(pool), 180, "the node back in the pool")


def save_on_page(staff, profile: ServerProfile, nodes: list[Node]):
    """The profile's edit page submitted as it is, with ``nodes`` ticked under "served by"."""
    from monitor.web.forms import ServerProfileForm

    page = f"/monitor/profiles/{profile.pk}/edit/"
    staff.get(page)
    data = {field: getattr(profile, field) for field in ServerProfileForm.Meta.fields}
    data = {key: value for key, value in data.items() if value is not False and value is not None}
    data.update(remote_api_key="", nodes=[node.pk for node in nodes], csrfmiddlewaretoken=staff.cookies["csrftoken"])
    return staff.post(page, data=data, headers={"Referer": base_url() + page})


def test_ticking_a_second_node_for_the_default_profile_on_its_page_loads_it_there(llama, second_node):
    """Issue 49: the default chat profile ticked for a second node on its edit page, nothing else pressed:
    that node's own worker loads it (it stayed idle until Load was pressed)."""
    profile = ServerProfile.objects.get(is_default=True)
    staff = login(make_user(is_staff=True))
    node_b = Node.objects.get(name=second_node.name)
    try:
        response = save_on_page(staff, profile, [local_node(), node_b])
        assert f"{profile.name} loads on {node_b.name}, where it is newly placed." in response.text
        on_b = lambda: asyncio.run(readiness.served_on([node_b.name], profile.name))  # noqa: E731
        wait_until(on_b, 240, f"{profile.name} served by {node_b.name}, loaded by its worker")
    finally:
        save_on_page(staff, profile, [local_node()])  # node-b is left: its worker unloads it
    wait_until(lambda: not asyncio.run(readiness.served_on([node_b.name], profile.name)), 120, "node-b left")
