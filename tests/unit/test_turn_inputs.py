"""A chat message's rows and what its turn reads before its request are read in one hop to the
database thread (chat/web/consumers.py), once. When those inputs cannot be read, the turn ends with
that failure's message (it is never left 'streaming') and does not read them a second time."""

from __future__ import annotations

import asyncio

from chat.conversations import turns
from chat.conversations.turns import TurnRunner
from chat.models import Message
from chat.web import consumers
from monitor.public import ProfileUnavailable
from tests.support.client import make_user


def test_the_messages_rows_and_the_turns_inputs_come_together(redis_server):
    person = make_user()
    conversation, user_message, answer, inputs = consumers._post(person, None, "Hello?", None, None)
    assert answer.status == Message.Status.STREAMING
    assert [message.id for message in inputs.history] == [user_message.id]
    assert inputs.profile is not None and inputs.has_documents is False


def test_inputs_that_cannot_be_read_end_the_turn_with_their_message_read_once(redis_server, monkeypatch):
    reads: list[int] = []

    def no_profile(*_args, **_kwargs):
        reads.append(1)
        raise ProfileUnavailable("No server profile named default is available.")

    monkeypatch.setattr(consumers, "turn_inputs", no_profile)
    monkeypatch.setattr(turns, "turn_inputs", no_profile)  # a second read would count here too
    person = make_user()
    conversation, _user_message, answer, inputs = consumers._post(person, None, "Hello?", None, None)
    assert isinstance(inputs, ProfileUnavailable) and answer.status == Message.Status.STREAMING
    sent: list[dict] = []

    async def send(event: dict) -> None:
        sent.append(event)

    runner = TurnRunner(
        conversation=conversation, assistant_id=answer.id, user_key=str(person.pk), send=send, inputs=inputs
    )
    asyncio.run(runner.run())
    answer.refresh_from_db()
    assert answer.status == Message.Status.ERROR and "No server profile" in answer.error
    assert sent[-1]["type"] == "done" and "No server profile" in sent[-1]["error"]
    assert len(reads) == 1
