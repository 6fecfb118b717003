"""What the web process keeps after answers have ended (issue 52): the chat consumer driven in this
process over channels' WebsocketCommunicator, its answers from the real llama-server with the
default model, Python's own allocations compared before and after a run of turns (tracemalloc),
and the freed heap handed back (``chat.conversations.heap``)."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc

import pytest
from channels.testing import WebsocketCommunicator
from django.test import override_settings

from chat.conversations import heap, runs
from chat.conversations.runs import WATCH_LIMIT, RunningAnswers
from chat.web.consumers import ChatConsumer
from monitor.redis_clients import close_loop_clients
from tests.support.client import make_user

WARM_UP = 10  # more than WATCH_LIMIT: the page's watches filled, every cache of the turn's path made
TURNS = 16
OPTIONS = {"seed": 1, "max_tokens": 3, "temperature": 0}
# Product code (the consumer, the registry of running answers, the turn, the llama client and the queue):
# what it allocated and still holds is what a web process would keep.
PRODUCT = [tracemalloc.Filter(True, pattern) for pattern in ("*/chat/*", "*/monitor/*")]


async def _turn(communicator: WebsocketCommunicator, number: int) -> None:
    """One message in a new conversation, up to its answer's end."""
    await communicator.send_json_to({"type": "send", "text": f"Say a word ({number}).", "options": OPTIONS})
    while True:
        event = await communicator.receive_json_from(timeout=120)
        if event["type"] == "error":
            raise AssertionError(event)
        if event["type"] == "done":
            assert event["status"] == "complete", event
            return


def _held_by_product() -> int:
    """Bytes allocated by product code and still alive (what only a cycle holds collected first)."""
    gc.collect()
    return sum(stat.size for stat in tracemalloc.take_snapshot().filter_traces(PRODUCT).statistics("filename"))


def test_turns_on_one_socket_keep_nothing_per_conversation(redis_server, llama, monkeypatch):
    """A page left open that starts conversation after conversation: after its answers have ended,
    the registry watches at most WATCH_LIMIT of them for it, and the product code holds no more
    memory after TURNS more turns than after the warm-up (a bound of 64 bytes a turn: a watch kept
    per conversation was about 400)."""
    user = make_user()
    answers = RunningAnswers()  # a fresh registry in the process's place
    monkeypatch.setattr(runs, "_running_answers", answers)
    measured: dict[str, int] = {}

    async def main() -> None:
        communicator = WebsocketCommunicator(ChatConsumer.as_asgi(), "/ws/chat/")
        communicator.scope["user"] = user
        connected, _ = await communicator.connect()
        assert connected
        tracemalloc.start()
        try:
            for number in range(WARM_UP):
                await _turn(communicator, number)
            before = _held_by_product()
            for number in range(WARM_UP, WARM_UP + TURNS):
                await _turn(communicator, number)
            measured["grown"] = _held_by_product() - before
            measured["watched"] = max(len(watching) for watching in answers._watching.values())
            measured["conversations"] = len(answers._watchers)
            measured["running"] = len(answers._runs)
        finally:
            tracemalloc.stop()
            await communicator.disconnect()
            await close_loop_clients()
        measured["after_close"] = len(answers._watchers) + len(answers._watching)

    with override_settings(CHAT_TURNS_PER_MINUTE=WARM_UP + TURNS):  # one person's turns in a row, at the model's pace
        asyncio.run(main())
    assert measured["running"] == 0, measured
    assert measured["watched"] <= WATCH_LIMIT, measured
    assert measured["conversations"] <= WATCH_LIMIT, measured
    assert measured["grown"] < 64 * TURNS, measured
    assert measured["after_close"] == 0, measured


def test_freed_heap_is_given_back_after_an_end_at_most_once_an_interval():
    calls: list[int] = []
    trimmer = heap.HeapTrimmer(trim=calls.append, interval_s=3600)

    async def main() -> None:
        trimmer.last -= 3600  # the last trim an interval ago
        for _ in range(5):  # answers and sockets ending one after the other: one trim
            trimmer.ended()
            await asyncio.sleep(0)
        while trimmer._running is not None:
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert calls == [0]
    assert trimmer.trims == 1


def test_the_trim_is_glibcs_own_where_there_is_one():
    trim = heap._malloc_trim()
    if trim is None:
        pytest.skip("not glibc: nothing to trim")
    assert trim(0) in (0, 1)
