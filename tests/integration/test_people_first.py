"""People first: a person's chat turn is served before a summary's next chunk, on the real
stack (HTTP upload, the Celery worker summarizing, the real llama-server with 2 slots, and
with 1: the default profile switched to ``--parallel 1`` and reloaded through the profile
services, as an admin's edit is, then switched back).

Nothing races the model: a summary's running chunk is a slot the test holds as background
work and releases itself, and the order of service is read from the queue's own grant log.
"""

from __future__ import annotations

import contextlib
import json
import time

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.db import transaction

from monitor.profiles.loading import load_profile
from monitor.profiles.selectors import find_profile
from monitor.profiles.services import apply_here, save_profile
from tests.integration.test_documents import long_report, wait_for
from tests.support import queue_state
from tests.support.client import chat_socket, events_until, login, make_user, send, upload_document
from tests.support.hold import queue_slots_held, read_queue

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")


def wait_for_waiting_chunk(name: str) -> None:
    deadline = time.monotonic() + 120
    while read_queue(name, lambda queue: queue_state.waiting_count(queue, "background")) < 1:
        assert time.monotonic() < deadline, "the summary's next chunk never stood in line"
        time.sleep(0.2)


def grants_of(name: str, user) -> list[str]:
    """The order in which this person's turn ('person') and their document's chunks ('chunk') got a slot."""
    grants = read_queue(name, lambda queue: queue_state.grants(queue))
    kinds = {(str(user.pk), "person"): "person", (f"owner:{user.pk}", "background"): "chunk"}
    return [kinds[grant.user, grant.priority] for grant in grants if (grant.user, grant.priority) in kinds]


def first_of(ws, types: set[str]) -> list[dict]:
    """Events up to the first of ``types``: a turn that starts without queueing fails at once."""
    events = []
    while not events or events[-1]["type"] not in types:
        events.append(json.loads(ws.recv(timeout=120)))
    return events


def summary_waiting_behind(name: str, ws_user, holds: contextlib.ExitStack, release_first: bool) -> None:
    """A summary whose next chunk waits while a person chats; the person's first token comes first."""
    http = login(ws_user)
    body = upload_document(http, "report.pdf", long_report(4), language="en").json()
    wait_for_waiting_chunk(name)
    with chat_socket(http) as ws:
        send(ws, type="send", text="Say hello.", options={"max_tokens": 8})
        if release_first:
            events = first_of(ws, {"queued", "started", "token", "done", "error"})
            # Its place counts only people: the summary's chunk waiting ahead of it is not counted.
            assert events[-1]["type"] == "queued" and events[-1]["position"] == 1, events
            holds.close()  # the running chunk finishes: its slot goes to the person
        events = events_until(ws, "token")
        assert events[-1]["type"] == "token", events
        granted = grants_of(name, ws_user)
        assert granted[0] == "person", granted  # served before the summary's next chunk
        if not release_first:
            # The running chunk still holds its slot and the other stays people's: the next chunk
            # waits while the turn runs. (Where the chunk's slot went to the person, the chunk may
            # take it back as soon as this short turn ends: that is no longer a race to check.)
            assert "chunk" not in granted
            assert read_queue(name, lambda queue: queue_state.waiting_count(queue, "background")) >= 1
        done = events_until(ws)[-1]
        assert done["type"] == "done" and done["status"] == "complete", done
    holds.close()
    document = wait_for(body["document"]["id"], {"ready", "failed"})
    assert document.status == "ready", document.error
    order = grants_of(name, ws_user)
    assert order[0] == "person" and "chunk" in order, order


def test_a_person_gets_a_free_slot_while_a_summary_runs_on_two_slots(llama):
    """One slot runs the summary's chunk; the other stays free for people, though the chunk queued first."""
    name = find_profile(None).name
    holds = contextlib.ExitStack()
    holds.enter_context(queue_slots_held(name, 1, priority="background"))  # the running chunk
    with holds:
        summary_waiting_behind(name, make_user(), holds, release_first=False)


def test_a_person_gets_the_slot_a_running_chunk_frees_before_the_next_chunk(llama):
    """Both slots busy (someone else's answer, a running chunk): the chunk's slot goes to the person."""
    name = find_profile(None).name
    with queue_slots_held(name, 1, priority="person"):  # another person's long answer
        holds = contextlib.ExitStack()
        holds.enter_context(queue_slots_held(name, 1, priority="background"))  # the running chunk
        with holds:
            summary_waiting_behind(name, make_user(), holds, release_first=True)


@contextlib.contextmanager
def default_profile_slots(llama, slots: int):
    """The default profile reloaded with ``slots`` slots (a new revision, loaded beside the live
    one as an admin's edit is); its former slot count is loaded back afterwards."""

    def switch(parallel: int) -> None:
        profile = find_profile(None)
        profile.parallel = parallel
        with transaction.atomic():
            save_profile(profile)
        if apply_here(profile):  # it serves and its options changed: the new revision loads
            async_to_sync(load_profile)(profile)

    before = find_profile(None).parallel
    switch(slots)
    try:
        yield
    finally:
        switch(before)


def server_slots(llama) -> tuple[int, int]:
    """(total_slots in llama-server's /props, entries in its /slots) of the default profile's instance."""
    props = httpx.get(llama.url + "/props", params={"model": llama.model_id}, headers=llama.headers, timeout=5)
    return props.json()["total_slots"], len(llama.slots())


def test_on_one_slot_a_person_gets_the_slot_a_running_chunk_frees_before_the_next_chunk(llama):
    """llama-server really has one slot; the summary's running chunk holds it and its next chunk
    waits: the person waits as first in line, then gets the slot before the next chunk does."""
    # Someone chats on two slots first: the web process has the served model's facts cached,
    # and must not keep its two slots once the profile serves with one.
    with chat_socket(login(make_user())) as ws:
        send(ws, type="send", text="Say hi.", options={"max_tokens": 4})
        assert events_until(ws)[-1]["status"] == "complete"
    with default_profile_slots(llama, 1):
        name = find_profile(None).name
        assert server_slots(llama) == (1, 1)
        holds = contextlib.ExitStack()
        holds.enter_context(queue_slots_held(name, 1, priority="background"))  # the running chunk
        with holds:
            summary_waiting_behind(name, make_user(), holds, release_first=True)
        assert server_slots(llama) == (1, 1)
    assert server_slots(llama)[0] == 2
