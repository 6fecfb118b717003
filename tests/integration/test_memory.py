"""What the web process keeps after answers have ended (issue 52): the chat consumer driven in this
process over channels' WebsocketCommunicator, its answers from the real llama-server with the
default model, Python's own allocations compared before and after a run of turns (tracemalloc),
and the freed heap handed back (``chat.conversations.heap``)."""

from __future__ import annotations

import asyncio
import gc
import logging
import tracemalloc

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.test import override_settings

from chat.conversations import heap, runs
from chat.conversations.runs import WATCH_LIMIT, RunningAnswers
from chat.web.consumers import ChatConsumer
from monitor.redis_clients import close_loop_clients
from qwenweb.asgi import application
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


def _fresh_login_cookie(user) -> bytes:
    """A new session for ``user``, as a login through the form makes one: the cookie a page sends."""
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}".encode()


def test_sockets_opened_after_fresh_logins_keep_nothing(redis_server):
    """The whole socket stack of the web process (origin check, sessions and auth, language, routing, the
    consumer), each socket opened with a new session and closed: what every library and the product still
    hold after OPENS more such sockets than after a warm-up, with a bound of 1 KiB a socket (a real stack
    was seen keeping 11-15 KiB per socket opened after a fresh login; here it is about 0.25 KiB: strings
    Django's query compiler and the database threads keep)."""
    user = make_user()
    opens = 150
    measured: dict[str, int] = {}

    async def open_and_close() -> None:
        cookie = await sync_to_async(_fresh_login_cookie)(user)
        headers = [(b"cookie", cookie), (b"origin", b"http://testserver"), (b"host", b"testserver")]
        communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
        connected, _ = await communicator.connect()
        assert connected
        await communicator.disconnect()

    async def main() -> None:
        for _ in range(20):
            await open_and_close()
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            for _ in range(opens):
                await open_and_close()
            gc.collect()
            diffs = tracemalloc.take_snapshot().compare_to(before, "filename")
            measured["grown"] = sum(stat.size_diff for stat in diffs)
        finally:
            tracemalloc.stop()
            await close_loop_clients()

    # pytest's own log capture keeps every record (the access log's two a socket); a running web process's
    # handlers write them out and keep nothing.
    root = logging.getLogger()
    capturing = [handler for handler in root.handlers if type(handler).__module__ == "_pytest.logging"]
    for handler in capturing:
        root.removeHandler(handler)
    try:
        asyncio.run(main())
    finally:
        for handler in capturing:
            root.addHandler(handler)
    assert measured["grown"] < 1024 * opens, measured


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
