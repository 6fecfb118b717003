"""The registry that runs answers apart from any page, and the frame clock that feeds each page (no services)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from django.test import Client

from chat.conversations import runs as answer_runs
from chat.conversations.frames import SLACK_S, FrameSender, coalesce
from chat.conversations.runs import RunningAnswers
from chat.errors import ChatError
from chat.models import Conversation
from tests.support.client import make_user

FRAME_S = 0.05


def test_coalesce_joins_consecutive_text_of_one_kind_and_keeps_the_last_seq():
    events = [
        {"type": "reasoning", "text": "a", "message": 1, "seq": 1},
        {"type": "token", "text": "b", "message": 1, "seq": 2},
        {"type": "token", "text": "c", "message": 1, "seq": 3},
        {"type": "queued", "position": 1, "seq": 4},
        {"type": "token", "text": "d", "message": 1, "seq": 5},
        {"type": "token", "text": "e", "message": 2, "seq": 6},
    ]
    before = [dict(event) for event in events]
    merged = coalesce(events)
    assert [(e["type"], e.get("text"), e["seq"]) for e in merged] == [
        ("reasoning", "a", 1),
        ("token", "bc", 3),
        ("queued", None, 4),
        ("token", "d", 5),
        ("token", "e", 6),
    ]
    assert events == before  # shared with other pages: never changed in place


WAIT_S = 5  # how long a wait on something the code under test must do gives it before failing


class Socket:
    def __init__(self):
        self.frames: list[tuple[float, dict]] = []
        self._arrived = asyncio.Event()

    async def send(self, event: dict) -> None:
        self.frames.append((time.monotonic(), event))
        self._arrived.set()

    def events(self) -> list[dict]:
        return [event for _, event in self.frames]

    async def until(self, check: Callable[[list[dict]], bool]) -> None:
        """Wait until the events received so far satisfy ``check`` (each delivery wakes it)."""

        async def wait() -> None:
            while not check(self.events()):
                self._arrived.clear()
                await self._arrived.wait()

        await asyncio.wait_for(wait(), WAIT_S)


def test_first_text_goes_at_once_and_the_rest_of_a_frame_goes_in_one():
    async def scenario():
        socket = Socket()
        sender = FrameSender(socket.send, FRAME_S)
        await sender.push({"type": "started"})
        await sender.push({"type": "token", "text": "first", "seq": 1})
        assert [e.get("text") for e in socket.events()] == [None, "first"]  # not held for the frame
        for seq in range(2, 6):
            await sender.push({"type": "token", "text": str(seq), "seq": seq})
        assert len(socket.frames) == 2  # waiting for the frame's end
        await socket.until(lambda events: len(events) == 3)  # the frame's timer sends the rest
        assert socket.events()[-1] == {"type": "token", "text": "2345", "seq": 5}
        gap = socket.frames[2][0] - socket.frames[1][0]
        assert gap >= FRAME_S * 0.9
        # Anything that is not text goes at once, after the text pending before it.
        await sender.push({"type": "token", "text": "w", "seq": 6})
        await sender.push({"type": "token", "text": "x", "seq": 7})  # within the frame: waits
        assert socket.events()[-1]["seq"] != 7
        await sender.push({"type": "done", "status": "complete", "seq": 8})
        assert [e["type"] for e in socket.events()[-2:]] == ["token", "done"]
        assert socket.events()[-2]["text"] in ("x", "wx")

    asyncio.run(scenario())


def test_text_at_its_frames_time_goes_without_a_timer_of_its_own():
    """The upstream reader wakes on the same clock: text that comes a hair before the frame's end
    goes then, not after a second wake-up for the few hundred microseconds left."""

    async def scenario():
        socket = Socket()
        sender = FrameSender(socket.send, FRAME_S)
        await sender.push({"type": "token", "text": "a", "seq": 1})
        sender._last_flush = time.monotonic() - FRAME_S + SLACK_S / 2  # the frame ends in SLACK_S / 2
        await sender.push({"type": "token", "text": "b", "seq": 2})
        assert [e["text"] for e in socket.events()] == ["a", "b"] and sender._timer is None
        await sender.push({"type": "token", "text": "c", "seq": 3})  # early in the next frame: waits
        assert sender._timer is not None and len(socket.frames) == 2
        sender.close()

    asyncio.run(scenario())


def test_a_held_sender_delivers_its_opening_before_what_came_meanwhile():
    async def scenario():
        socket = Socket()
        sender = FrameSender(socket.send, FRAME_S)
        sender.hold()
        await sender.push({"type": "token", "text": "live", "seq": 4})
        assert socket.frames == []
        await sender.release([{"type": "snapshot", "content": "old", "seq": 3}])
        assert [e["type"] for e in socket.events()] == ["snapshot", "token"]

    asyncio.run(scenario())


class ScriptedRunner:
    """A TurnRunner's outside: emits the tokens it is given as the test releases them."""

    def __init__(self, *, conversation, assistant_id, user_key, send, options, inputs=None):
        self.send = send
        self.tokens: asyncio.Queue = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.stop_status = "complete"
        self.stops: list[str] = []  # every stop asked of it, as it is asked

    def start(self) -> asyncio.Task:
        self.task = asyncio.create_task(self.run())
        return self.task

    def stop(self, status: str = "stopped", note: str = "") -> None:
        self.stops.append(status)
        self.stop_status = status
        self.task.cancel()

    async def run(self) -> None:
        try:
            while (text := await self.tokens.get()) is not None:
                await self.send({"type": "token", "text": text, "message": 1})
                self.tokens.task_done()  # published: what ``delivered`` waits for
        except asyncio.CancelledError:
            await self.send({"type": "done", "status": self.stop_status, "message": 1})
            raise
        await self.send({"type": "done", "status": "complete", "message": 1})
        self.tokens.task_done()


async def delivered(run) -> None:
    """Every token given to the runner so far has been published to the pages watching (``frame_s=0``:
    a page's frame goes as its event is published)."""
    await asyncio.wait_for(run.runner.tokens.join(), WAIT_S)


async def ended(run) -> None:
    """The run's task has finished (its "done" published, the registry told)."""
    finished, _ = await asyncio.wait([run.runner.task], timeout=WAIT_S)
    assert finished, "the answer never ended"


async def loop_caught_up() -> None:
    """Every callback handed to this loop before now (``call_soon_threadsafe`` from a view's thread
    included) has run: the loop runs them in the order they came."""
    caught_up = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(caught_up.set_result, None)
    await caught_up


async def start_scripted(answers: RunningAnswers, conversation: Conversation):
    return await answers.start(
        conversation=conversation,
        assistant_id=1,
        options={},
        accepted={"type": "accepted"},
        runner_class=ScriptedRunner,
    )


def test_a_page_that_opens_mid_answer_gets_the_snapshot_then_the_rest_once():
    async def scenario():
        answers = RunningAnswers(frame_s=0)
        conversation = Conversation(id=uuid.uuid4(), owner_id=7)
        first = Socket()
        first_sender = answers.sender(first.send, 7)
        answers.watch(first_sender, conversation)
        run = await start_scripted(answers, conversation)
        for text in ("one ", "two "):
            run.runner.tokens.put_nowait(text)
        await delivered(run)
        # The first page closes (no page watches now): the answer goes on.
        answers.unwatch(first_sender)
        run.runner.tokens.put_nowait("three ")
        await delivered(run)
        second = Socket()
        opening = answers.watch(answers.sender(second.send, 7), conversation)
        snapshot = opening[0]
        assert snapshot["type"] == "snapshot" and snapshot["content"] == "one two three "
        for event in opening:
            await second.send(event)
        run.runner.tokens.put_nowait("four")
        run.runner.tokens.put_nowait(None)
        await delivered(run)  # its 'done' too
        live = [e for e in second.events() if e["type"] == "token"]
        assert all(e["seq"] > snapshot["seq"] for e in live)
        assert snapshot["content"] + "".join(e["text"] for e in live) == "one two three four"
        assert second.events()[-1]["type"] == "done"
        assert answers._runs.get(str(conversation.id)) is None
        assert [e["type"] for e in first.events()] == ["accepted", "token", "token"]

    asyncio.run(scenario())


def test_stop_from_any_page_of_the_owner_and_nobody_elses():
    async def scenario():
        answers = RunningAnswers(frame_s=0)
        conversation = Conversation(id=uuid.uuid4(), owner_id=7)
        pages = [Socket(), Socket()]
        for page in pages:
            answers.watch(answers.sender(page.send, 7), conversation)
        stranger = Socket()
        with pytest.raises(ChatError, match="does not exist"):
            answers.watch(answers.sender(stranger.send, 8), conversation)
        run = await start_scripted(answers, conversation)
        with pytest.raises(ChatError, match="Wait for the current answer"):
            with answers.claim(str(conversation.id), 7):
                pass
        run.runner.tokens.put_nowait("hello")
        await delivered(run)
        answers.stop(str(conversation.id), 8)  # not theirs: nothing happens
        assert run.runner.stops == [] and answers._runs.get(str(conversation.id)) is run
        run.runner.tokens.put_nowait("still here")
        await delivered(run)  # the answer went on after the stranger's Stop
        answers.stop(str(conversation.id), 7)
        await ended(run)
        assert run.runner.stops == ["stopped"]
        for page in pages:
            assert [e["type"] for e in page.events()] == ["accepted", "token", "token", "done"]
            assert page.events()[-1]["status"] == "stopped"
        assert stranger.frames == []
        assert answers._runs.get(str(conversation.id)) is None

    asyncio.run(scenario())


def test_deleting_conversations_stops_their_running_answers(monkeypatch):
    """The delete views run in a thread of their own, not the answers's loop: the answers of the deleted
    conversations are stopped there (one delete, and delete-many), not left writing to their last token."""
    answers = RunningAnswers()  # the views stop answers in the process's registry: a fresh one in its place
    monkeypatch.setattr(answer_runs, "_running_answers", answers)
    user = make_user()
    conversations = [Conversation.objects.create(owner=user) for _ in range(2)]
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        runs = [asyncio.run_coroutine_threadsafe(start_scripted(answers, c), loop).result(5) for c in conversations]
        client = Client(SERVER_NAME="127.0.0.1")
        client.force_login(user)
        assert client.post(f"/c/{conversations[0].id}/delete/").status_code == 302
        assert client.post("/c/delete-many/", {"ids": [str(conversations[1].id)]}).status_code == 302
        deadline = time.monotonic() + 5
        while any(answers._runs.get(str(c.id)) for c in conversations) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [answers._runs.get(str(c.id)) for c in conversations] == [None, None]
        assert [run.runner.stop_status for run in runs] == ["stopped", "stopped"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_stop_from_thread_stops_only_the_owners_answer():
    async def scenario():
        answers = RunningAnswers(frame_s=0)
        conversation = Conversation(id=uuid.uuid4(), owner_id=7)
        run = await start_scripted(answers, conversation)
        await asyncio.to_thread(answers.stop_from_thread, [conversation.id, uuid.uuid4()], 8)  # not theirs
        await loop_caught_up()  # what the view's thread handed to the loop has run
        assert run.runner.stops == [] and answers._runs.get(str(conversation.id)) is run
        await asyncio.to_thread(answers.stop_from_thread, [conversation.id], 7)
        await ended(run)
        assert answers._runs.get(str(conversation.id)) is None and run.runner.stops == ["stopped"]

    asyncio.run(scenario())
