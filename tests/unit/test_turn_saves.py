"""A running answer's stored text stays at most one save interval behind what its pages show: text
that comes just after a save is saved when its time comes, even when nothing more arrives (a web
process that dies then keeps it), and a save still waiting is dropped by the answer's final write."""

from __future__ import annotations

import asyncio
import time
import uuid

from django.test import override_settings

from chat.conversations import turns
from chat.conversations.turns import TurnRunner
from chat.models import Conversation


def runner() -> TurnRunner:
    async def send(_event: dict) -> None:
        pass

    conversation = Conversation(id=uuid.uuid4(), owner_id=1)
    return TurnRunner(conversation=conversation, assistant_id=1, user_key="1", send=send)


@override_settings(CHAT_SAVE_INTERVAL_S=0.3)
def test_text_after_a_save_is_saved_when_its_time_comes_though_nothing_more_arrives(monkeypatch):
    saved: list[tuple[float, str]] = []
    monkeypatch.setattr(turns, "save_progress", lambda _id, text, _reasoning: saved.append((time.monotonic(), text)))

    async def main():
        turn = runner()
        turn.content.append("first ")
        turn._maybe_save()  # the first text is saved at once
        await turn._save_task
        turn.content.append("second")  # then nothing more comes
        turn._maybe_save()
        await asyncio.wait_for(turn._save_task, timeout=5)

    asyncio.run(main())
    assert [text for _at, text in saved] == ["first ", "first second"]
    assert saved[1][0] - saved[0][0] >= 0.25  # it waited for its time, then went without more text


@override_settings(CHAT_SAVE_INTERVAL_S=0.3)
def test_several_batches_within_an_interval_make_one_save_of_the_newest_text(monkeypatch):
    saved: list[str] = []
    monkeypatch.setattr(turns, "save_progress", lambda _id, text, _reasoning: saved.append(text))

    async def main():
        turn = runner()
        turn._last_save = time.monotonic()  # just saved
        for word in ("a", "b", "c"):
            turn.content.append(word)
            turn._maybe_save()
        await asyncio.wait_for(turn._save_task, timeout=5)

    asyncio.run(main())
    assert saved == ["abc"]


@override_settings(CHAT_SAVE_INTERVAL_S=30)
def test_a_save_still_waiting_is_dropped_by_the_final_write(monkeypatch):
    saved: list[str] = []
    finished: list[str] = []
    monkeypatch.setattr(turns, "save_progress", lambda _id, text, _reasoning: saved.append(text))
    monkeypatch.setattr(turns, "finish_message", lambda _id, **fields: finished.append(fields["content"]))

    async def main():
        turn = runner()
        turn._last_save = time.monotonic()
        turn.content.append("all of it")
        turn._maybe_save()  # due in 30 s
        started = time.monotonic()
        await turn._finish("complete", "")
        return time.monotonic() - started

    assert asyncio.run(main()) < 5  # the answer's end did not wait for the scheduled save
    assert saved == [] and finished == ["all of it"]
