"""People first: a person's chat turn is served before a summary's next chunk, on the real
stack (HTTP upload, the Celery worker summarizing, the real llama-server with 2 slots).

Nothing races the model: a summary's running chunk is a slot the test holds as background
work and releases itself, and the order of service is read from the queue's own grant log.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from chat.queue import FairQueue
from monitor.profiles.selectors import find_profile
from tests.integration.test_documents import long_report, wait_for
from tests.support.client import chat_socket, events_until, login, make_user, send, upload_document
from tests.support.hold import queue_slots_held

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")


def queue_state(name: str, read):
    async def main():
        queue = FairQueue(name=name, capacity=2)
        try:
            return await read(queue)
        finally:
            await queue.aclose()

    return asyncio.run(main())


def wait_for_waiting_chunk(name: str) -> None:
    deadline = time.monotonic() + 120
    while queue_state(name, lambda queue: queue.waiting_count("background")) < 1:
        assert time.monotonic() < deadline, "the summary's next chunk never stood in line"
        time.sleep(0.2)


def grants_of(name: str, user) -> list[str]:
    """The order in which this person's turn ('person') and their document's chunks ('chunk') got a slot."""
    grants = queue_state(name, lambda queue: queue.grants())
    kinds = {(str(user.pk), "person"): "person", (f"owner:{user.pk}", "background"): "chunk"}
    return [kinds[grant.user, grant.priority] for grant in grants if (grant.user, grant.priority) in kinds]


def summary_waiting_behind(name: str, ws_user, holds: contextlib.ExitStack, release_first: bool) -> None:
    """A summary whose next chunk waits while a person chats; the person's first token comes first."""
    http = login(ws_user)
    body = upload_document(http, "report.pdf", long_report(4), language="en").json()
    wait_for_waiting_chunk(name)
    with chat_socket(http) as ws:
        send(ws, type="send", text="Say hello.", options={"max_tokens": 8})
        if release_first:
            events = events_until(ws, "queued")
            # Its place counts only people: the summary's chunk waiting ahead of it is not counted.
            assert events[-1]["type"] == "queued" and events[-1]["position"] == 1, events
            holds.close()  # the running chunk finishes: its slot goes to the person
        events = events_until(ws, "token")
        assert events[-1]["type"] == "token", events
        # First token shown, and the summary's next chunk is still waiting for its slot.
        assert "chunk" not in grants_of(name, ws_user)
        assert queue_state(name, lambda queue: queue.waiting_count("background")) >= 1
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
    holds.enter_context(queue_slots_held(name, 1, capacity=2, priority="background"))  # the running chunk
    with holds:
        summary_waiting_behind(name, make_user(), holds, release_first=False)


def test_a_person_gets_the_slot_a_running_chunk_frees_before_the_next_chunk(llama):
    """Both slots busy (someone else's answer, a running chunk): the chunk's slot goes to the person."""
    name = find_profile(None).name
    with queue_slots_held(name, 1, capacity=2, priority="person"):  # another person's long answer
        holds = contextlib.ExitStack()
        holds.enter_context(queue_slots_held(name, 1, capacity=2, priority="background"))  # the running chunk
        with holds:
            summary_waiting_behind(name, make_user(), holds, release_first=True)
