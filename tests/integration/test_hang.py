"""A model instance that freezes while it answers (SIGSTOP: what a hung GPU driver or a deadlock looks like)
is noticed: the person is told, the frozen process is killed and loaded again by its node's heartbeat, the
answer goes on there from the text it had, the timeline says so, and the next turn is answered.

The real stack: the product's llama-server supervisor (its heartbeat), Daphne, a worker. The profile is a
copy of the default one whose answers run to their max_tokens (``--ignore-eos``), so the answer is
still running when the test freezes it, and whose hang limit is short (an admin's setting).
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from django.conf import settings

from chat.models import Message
from monitor.models import Event
from monitor.serving.slot import STILL_WORKING_TIMEOUT_S
from tests.support.client import chat_socket, events_until, login, make_user, send, text_of
from tests.support.profiles import ignoring_eos, live_id_here
from tests.support.stack import wait_until

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")
HANG_LIMIT_S = 4


@pytest.fixture
def freezable(llama):
    with ignoring_eos(llama, "freeze", hang_limit_s=HANG_LIMIT_S) as profile:
        yield profile


def test_a_frozen_instance_is_noticed_restarted_and_its_answer_goes_on_there_once_back(llama, freezable):
    """The only instance frozen mid-answer: the person is told the answer waits, its node restarts the
    instance, and the answer goes on there from the text it had (issue 52), stored as one message."""
    http = login(make_user())
    with chat_socket(http) as ws:
        send(ws, type="send", text="Write a long story.", options={"max_tokens": 80}, profile=freezable.name)
        accepted = events_until(ws, "accepted")[-1]
        before = events_until(ws, "token", timeout=300)
        frozen = llama.instance_pid(live_id_here(freezable))
        frozen_at = time.monotonic()
        os.kill(frozen, signal.SIGSTOP)
        try:
            told = events_until(ws, "notice", timeout=300)
            noticed_s = time.monotonic() - frozen_at
            after = events_until(ws, timeout=300)
        finally:
            if psutil.pid_exists(frozen):
                os.kill(frozen, signal.SIGCONT)
    done = after[-1]
    assert "goes on as soon as a server can take it" in told[-1]["text"], told[-1]
    # Told within the limit and one check (a wide margin for a loaded box; llama-server's own read
    # timeout, which is all there was before, is ten minutes).
    assert noticed_s < HANG_LIMIT_S + STILL_WORKING_TIMEOUT_S + 60, noticed_s
    assert done["type"] == "done" and done["status"] == "complete", done
    assert [event["node"] for event in after if event["type"] == "resumed"] == [settings.NODE_NAME]
    answer = Message.objects.get(id=accepted["assistant_message"]["id"])
    streamed = text_of(before + told + after)
    assert answer.content == streamed and len(answer.content) > len(text_of(before))  # one message, each word once
    assert [note["node"] for note in answer.stats["resumed"]] == [settings.NODE_NAME]

    # The frozen process is gone (its node's heartbeat killed it), and the profile is served again.
    wait_until(lambda: not psutil.pid_exists(frozen) or psutil.Process(frozen).status() == "zombie", 60, "the kill")
    event = wait_until_event(freezable.name)
    assert "stopped responding" in event.message and event.details.get("killed") is True
    with chat_socket(http) as ws:
        send(
            ws, type="send", conversation=accepted["conversation"], text="Again.", options={"max_tokens": 8},
            profile=freezable.name,
        )  # fmt: skip
        again = events_until(ws, timeout=300)[-1]
        assert again["status"] == "complete", again
    assert llama.instance_pid(live_id_here(freezable)) != frozen


def wait_until_event(profile: str) -> Event:
    found: list[Event] = []

    def restarted() -> bool:
        found[:] = list(Event.objects.filter(kind=Event.Kind.SERVER_RESTARTED, profile=profile))
        return bool(found)

    wait_until(restarted, 60, "the restart on the timeline")
    return found[0]
