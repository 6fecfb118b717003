"""A running answer's stored text stays at most one save interval behind what its pages show: text
that comes just after a save is saved when its time comes, even when nothing more arrives (a web
process that dies then keeps it), and a save still waiting is dropped by the answer's final write.

The saves go through the process's writer thread (``chat.conversations.progress``): the newest text
of each answer once, nothing written after the answer's final text, and a failed save not the end of
the writer."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
import uuid

import pytest
from django.test import override_settings

from chat.conversations import progress, turns
from chat.conversations.progress import ProgressWriter
from chat.conversations.turns import TurnRunner
from chat.models import Conversation
from tests.support.stack import wait_until


def runner() -> TurnRunner:
    async def send(_event: dict) -> None:
        pass

    conversation = Conversation(id=uuid.uuid4(), owner_id=1)
    return TurnRunner(conversation=conversation, assistant_id=1, user_key="1", send=send)


class Recorder:
    """A save that records (when, message, text) and, while ``hold`` is clear, waits for it."""

    def __init__(self):
        self.saved: queue.Queue[tuple[float, int, str]] = queue.Queue()
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()

    def __call__(self, message_id: int, content: str, _reasoning: str) -> None:
        self.entered.set()
        assert self.hold.wait(10)
        self.saved.put((time.monotonic(), message_id, content))

    def next(self) -> tuple[float, int, str]:
        return self.saved.get(timeout=10)

    def rest(self) -> list[str]:
        texts = []
        while not self.saved.empty():
            texts.append(self.saved.get_nowait()[2])
        return texts


def writer_busy_with(message_id: int, text: str) -> tuple[Recorder, ProgressWriter]:
    """A writer held in the middle of saving ``text`` of ``message_id`` (until ``hold`` is set)."""
    recorder = Recorder()
    writer = ProgressWriter(recorder)
    recorder.hold.clear()
    writer.put(message_id, text, "")
    assert recorder.entered.wait(10)
    return recorder, writer


class Puts:
    """Stands in for the writer in the turn's tests: records each put, on the event loop, as it is made."""

    def __init__(self):
        self.made: list[tuple[float, str]] = []

    def put(self, _message_id: int, content: str, _reasoning: str) -> None:
        self.made.append((time.monotonic(), content))

    def settle(self, _message_id: int) -> None:
        pass

    def texts(self) -> list[str]:
        return [text for _at, text in self.made]


async def saved(puts: Puts, count: int, timeout_s: float = 30) -> None:
    """Until ``count`` saves were made (the event loop runs their timers meanwhile)."""
    async with asyncio.timeout(timeout_s):
        while len(puts.made) < count:
            await asyncio.sleep(0.01)


@pytest.fixture
def puts(monkeypatch) -> Puts:
    puts = Puts()
    monkeypatch.setattr(progress, "writer", puts)
    return puts


@override_settings(CHAT_SAVE_INTERVAL_S=0.3)
def test_text_after_a_save_is_saved_when_its_time_comes_though_nothing_more_arrives(puts):
    async def main():
        turn = runner()
        turn.content.append("first ")
        turn._maybe_save()  # the first text is saved at once
        turn.content.append("second")  # then nothing more comes
        turn._maybe_save()
        await saved(puts, 2)  # the loop runs meanwhile: the scheduled save is a timer of it

    asyncio.run(main())
    assert puts.texts() == ["first ", "first second"]
    assert puts.made[1][0] - puts.made[0][0] >= 0.25  # it waited for its time, then went without more text


@override_settings(CHAT_SAVE_INTERVAL_S=0.3)
def test_several_batches_within_an_interval_make_one_save_of_the_newest_text(puts):
    async def main():
        turn = runner()
        turn._last_save = time.monotonic()  # just saved
        for word in ("a", "b", "c"):
            turn.content.append(word)
            turn._maybe_save()
        await saved(puts, 1)
        assert turn._save_timer is None  # nothing more is scheduled: that save was the only one

    asyncio.run(main())
    assert puts.texts() == ["abc"]


@override_settings(CHAT_SAVE_INTERVAL_S=0.3)
def test_a_save_still_waiting_is_dropped_by_the_final_write(puts, monkeypatch):
    finished: list[str] = []
    monkeypatch.setattr(turns, "finish_message", lambda _id, **fields: finished.append(fields["content"]))

    async def main():
        turn = runner()
        turn._last_save = time.monotonic()
        turn.content.append("all of it")
        turn._maybe_save()  # due in 0.3 s
        waiting = turn._save_timer
        await turn._finish("complete", "")
        assert waiting.cancelled() and turn._save_timer is None  # the loop will never run it

    asyncio.run(main())
    assert finished == ["all of it"] and puts.texts() == []


def test_the_final_write_comes_after_a_save_being_written(monkeypatch):
    recorder, writer = writer_busy_with(1, "partial")  # answer 1's text so far is being written
    monkeypatch.setattr(progress, "writer", writer)
    finished: list[float] = []
    monkeypatch.setattr(turns, "finish_message", lambda _id, **fields: finished.append(time.monotonic()))

    async def main():
        turn = runner()
        turn.content.append("partial and the rest")
        asyncio.get_running_loop().call_later(0.2, recorder.hold.set)  # time for a final write that does not wait
        await turn._finish("complete", "")

    asyncio.run(main())
    saved_at = recorder.next()[0]
    assert finished and finished[0] >= saved_at


def idle(writer: ProgressWriter) -> None:
    """Wait until ``writer`` has nothing left to write."""

    def done() -> bool:
        with writer._changed:
            return not writer._due and writer._writing is None

    wait_until(done, 10, "the writer's last save")


def test_the_writer_saves_each_answer_s_newest_text_once():
    recorder, writer = writer_busy_with(1, "a")  # the writer is in answer 1's first save
    for text in ("ab", "abc"):
        writer.put(1, text, "")
    writer.put(2, "other", "")
    recorder.hold.set()
    texts = {recorder.next()[1:] for _ in range(3)}
    assert texts == {(1, "a"), (1, "abc"), (2, "other")}  # "ab" was replaced before it was written


def test_settle_drops_a_save_not_yet_written():
    recorder, writer = writer_busy_with(1, "busy")
    writer.put(2, "too late", "")
    writer.settle(2)  # answer 2's final write comes now
    writer.put(3, "after", "")
    recorder.hold.set()
    idle(writer)
    assert recorder.rest() == ["busy", "after"]


def test_settle_waits_for_a_save_being_written():
    recorder, writer = writer_busy_with(1, "partial")
    settled: list[float] = []
    waiter = threading.Thread(target=lambda: (writer.settle(1), settled.append(time.monotonic())))
    waiter.start()
    time.sleep(0.2)  # time for a settle that does not wait to return early
    recorder.hold.set()
    saved_at = recorder.next()[0]
    waiter.join(10)
    assert settled and settled[0] >= saved_at  # the final write came after the partial one landed


def test_a_failed_save_is_logged_and_the_writer_goes_on(caplog):
    saved: queue.Queue[str] = queue.Queue()

    def save(message_id: int, content: str, _reasoning: str) -> None:
        if content == "bad":
            raise RuntimeError("database is locked")
        saved.put(content)

    writer = ProgressWriter(save)
    writer.put(1, "bad", "")
    idle(writer)
    assert "could not save the text so far of answer 1" in caplog.text
    thread = writer._thread
    writer.put(2, "good", "")
    assert saved.get(timeout=10) == "good"
    assert writer._thread is thread  # the same thread, not one started again
