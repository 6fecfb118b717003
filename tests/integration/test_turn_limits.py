"""Turn limits through the real socket: answers in flight and answers a minute, named to the person.

The first answers are held in the profile's real fair queue (the test takes its slots), so
they are still in flight when the next one is refused, however fast the model is.
"""

from __future__ import annotations

import pytest
from django.conf import settings

from chat.models import Conversation, Message
from monitor.profiles.selectors import find_profile
from tests.support.client import chat_socket, events_until, login, make_user, send
from tests.support.hold import assert_queue_left_idle, queue_slots_held

pytestmark = pytest.mark.usefixtures("web_server")


def rows(user) -> tuple[int, int]:
    return (
        Conversation.objects.filter(owner=user).count(),
        Message.objects.filter(conversation__owner=user).count(),
    )


def test_third_answer_in_flight_is_refused_before_anything_is_written(llama):
    assert settings.CHAT_TURNS_IN_FLIGHT == 2
    user, other = make_user(), make_user()
    queue = find_profile(None).name
    with queue_slots_held(queue, 2), chat_socket(login(user)) as ws:
        accepted = []
        for index in range(2):
            send(ws, type="send", text=f"question {index}")
            accepted.append(events_until(ws, "accepted")[-1])
        assert [event["type"] for event in accepted] == ["accepted", "accepted"]
        before = rows(user)
        send(ws, type="send", text="one more")
        refused = events_until(ws, "accepted")[-1]
        assert refused == {
            "type": "error",
            "message": "You already have 2 answers being written; wait for one to finish.",
            "conversation": None,
        }
        assert rows(user) == before
        # Someone else is not limited by this person's answers.
        with chat_socket(login(other)) as other_ws:
            send(other_ws, type="send", text="hello")
            theirs = events_until(other_ws, "accepted")[-1]
            assert theirs["type"] == "accepted"
            send(other_ws, type="stop", conversation=theirs["conversation"])
            assert events_until(other_ws)[-1]["status"] == "stopped"
        # One ends: the next is accepted.
        send(ws, type="stop", conversation=accepted[0]["conversation"])
        done = [e for e in events_until(ws) if e["type"] == "done"]
        assert done and done[-1]["status"] == "stopped"
        send(ws, type="send", text="now there is room")
        room = events_until(ws, "accepted")[-1]
        assert room["type"] == "accepted"
        # Stopped while still in line: once the hold lets go, no answer runs on into the next test.
        for conversation in (accepted[1]["conversation"], room["conversation"]):
            send(ws, type="stop", conversation=conversation)
            assert events_until(ws)[-1]["status"] == "stopped"
    assert_queue_left_idle(queue)


def test_answers_a_minute_are_limited(llama):
    limit = settings.CHAT_TURNS_PER_MINUTE
    user = make_user()
    queue = find_profile(None).name
    with queue_slots_held(queue, 2), chat_socket(login(user)) as ws:
        refused = None
        for index in range(2 * limit + 1):
            send(ws, type="send", text=f"question {index}")
            event = events_until(ws, "accepted")[-1]
            if event["type"] == "error":
                refused = (index, event["message"])
                break
            send(ws, type="stop", conversation=event["conversation"])
            assert events_until(ws)[-1]["status"] == "stopped"
        before = rows(user)
    # The minute may turn over during the loop: the count then starts again, and the limit is
    # reached within twice as many turns.
    assert refused is not None, "no turn was refused"
    assert refused[0] >= limit
    assert refused[1] == f"You can start at most {limit} answers a minute; wait a moment and send again."
    assert rows(user) == before
    assert_queue_left_idle(queue)
