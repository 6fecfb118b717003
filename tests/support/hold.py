"""Hold points a test releases itself, so no test races the model's speed."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterator

from monitor.models import ServerProfile
from monitor.redis_clients import close_loop_clients
from monitor.serving.members import pool_members
from monitor.serving.queue import FairQueue, Priority
from monitor.serving.slot import serving_pool
from tests.support import queue_state

HOLD_WAIT_S = 30  # how long a hold waits for work that a test left in the queue


@contextlib.asynccontextmanager
async def held_slot(queue: FairQueue, owner: str, nodes: list[str], priority: Priority = "person"):
    """One slot of a real fair queue for the block (what a serving slot holds, without a request)."""
    grant = await queue.acquire(owner, nodes, priority=priority)
    try:
        yield grant
    finally:
        await queue.release(grant)


@contextlib.contextmanager
def queue_slots_held(
    queue_name: str, count: int, *, priority: Priority = "person", wait_s: float = HOLD_WAIT_S
) -> Iterator[None]:
    """Take ``count`` slots of a profile's real fair queue (in Redis) until the block ends.

    Work queued behind them (a summary's chunks, a chat turn) waits in line, however fast
    the machine or the model, until the test leaves the block. ``priority="background"``
    holds them as a summary's running chunks would. The slots are on the nodes that serve
    the profile, as their heartbeats say (so it must be served). ``wait_s``: how long it may wait
    in line for them (longer where it waits on purpose for a model call to end).
    """
    held, release = threading.Event(), threading.Event()
    failure: list[BaseException] = []
    nodes = list(pool_members(ServerProfile.objects.get(name=queue_name)))

    async def hold() -> None:
        await serving_pool(queue_name)  # served (loaded again if an earlier test put another in its place)
        queue = FairQueue(queue_name)

        async def take(slots: contextlib.AsyncExitStack) -> None:
            for index in range(count):
                await slots.enter_async_context(held_slot(queue, f"test-hold-{index}", nodes, priority))

        try:
            async with contextlib.AsyncExitStack() as slots:
                # Given up after a while (leaving the line): a hold that waited on forever would
                # keep its thread, and the test run, from ever ending.
                await asyncio.wait_for(take(slots), wait_s)
                held.set()
                await asyncio.to_thread(release.wait)
        finally:
            await close_loop_clients()

    def run() -> None:
        try:
            asyncio.run(hold())
        except BaseException as error:  # reported to the test below
            failure.append(error)
            held.set()

    thread = threading.Thread(target=run, name=f"hold-{queue_name}", daemon=True)
    thread.start()
    try:
        assert held.wait(wait_s + 30), "the queue's holder never answered"
        if failure:
            if isinstance(failure[0], asyncio.TimeoutError):
                raise AssertionError(f"could not take the queue's slots: {_holders(queue_name)}")
            raise failure[0]
        yield
    finally:
        release.set()
        thread.join(30)


class NodeSlotsHeld:
    """Slots of a pool held on chosen nodes by a thread of their own, until ``release()``."""

    def __init__(self) -> None:
        self.release_event = threading.Event()
        self.held = threading.Event()

    def release(self) -> None:
        self.release_event.set()


def node_slots_held(queue_name: str, nodes: list[str], owner: str = "test-holder") -> NodeSlotsHeld:
    """One slot of the pool on each of ``nodes`` (as running answers would), held until released: work
    for the pool goes to its other nodes, or waits, until then."""
    handle = NodeSlotsHeld()

    async def hold() -> None:
        queue = FairQueue(queue_name)
        try:
            async with contextlib.AsyncExitStack() as slots:
                for node in nodes:
                    await slots.enter_async_context(held_slot(queue, owner, [node]))
                handle.held.set()
                await asyncio.to_thread(handle.release_event.wait)
        finally:
            await close_loop_clients()

    threading.Thread(target=asyncio.run, args=(hold(),), daemon=True).start()
    assert handle.held.wait(HOLD_WAIT_S * 2), f"could not hold slots of {queue_name} on {nodes}"
    return handle


def read_queue(queue_name: str, read: Callable[[FairQueue], Awaitable]):
    """``read(queue)`` on a connection of its own, from sync test code."""

    async def run():
        queue = FairQueue(queue_name)
        try:
            return await read(queue)
        finally:
            await close_loop_clients()

    return asyncio.run(run())


def _holders(queue_name: str) -> str:
    """Who holds the queue's slots now, from its grant log (for a failure's message)."""

    async def read(queue: FairQueue) -> str:
        return f"{await queue_state.active_count(queue)} held; last grants: {(await queue_state.grants(queue, 5))!r}"

    return read_queue(queue_name, read)


def assert_queue_left_idle(queue_name: str, settle_s: float = 1.0) -> None:
    """Nothing a test started still holds or waits for the queue's slots once its hold is let go.

    A turn left waiting behind a hold takes the slots the moment the hold ends and keeps them
    for as long as the model writes: the next test's hold would wait on it. Call after the
    test's own hold (which took every slot) has ended.
    """
    time.sleep(settle_s)
    active = read_queue(queue_name, queue_state.active_count)
    assert active == 0, f"the test left work in the queue: {_holders(queue_name)}"


@contextlib.contextmanager
def llama_paused(llama) -> Iterator[None]:
    """Freeze the llama-server router (SIGSTOP) until the block ends: an answer's text stops
    arriving, however fast the model, so a test can compare pages while nothing changes.
    Its requests wait (nothing fails: the app's read timeout is minutes), then go on."""
    import os
    import signal

    router = llama.router_pid()
    os.kill(router, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(router, signal.SIGCONT)


@contextlib.contextmanager
def instance_paused(llama, model_id: str | None = None) -> Iterator[None]:
    """Freeze the llama-server instance that serves ``model_id`` (SIGSTOP) until the block ends: it
    generates nothing meanwhile, however fast the machine, so an answer that has started is still
    running for as long as the test needs (to stop it, cut it, or open another page on it). The
    router stays up: a request that gives up meanwhile is closed there, and the instance learns it
    at its next write once it goes on. Killing it inside the block is fine."""
    with pids_paused([llama.instance_pid(model_id)]):
        yield


@contextlib.contextmanager
def pids_paused(pids: list[int]) -> Iterator[None]:
    """Freeze these processes (SIGSTOP) until the block ends; one killed inside the block is fine."""
    import os
    import signal

    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


@contextlib.contextmanager
def worker_paused(worker) -> Iterator[None]:
    """Freeze a Celery worker (SIGSTOP to its process group) until the block ends: a task queued for it
    (a profile's load) waits, however fast the machine, and runs once the test lets go."""
    with group_paused(worker.process.pid):
        yield


def reading_held(workers, upload: Callable[[], dict]) -> dict:
    """A document whose reader is held at its file's opening: uploaded (``upload()`` returns the
    upload's JSON; a text file: PDFium refuses a path that is not a regular file, so a held PDF's reader
    would end at once) while the documents worker is frozen, its stored file swapped meanwhile for a
    named pipe nobody writes to. The reader child the worker then starts waits there, however fast the
    machine, for as long as the test needs (to kill it, stop it, cancel or delete its document).
    Returns the uploaded document's JSON."""
    import os

    from chat.documents.uploads import stored_file
    from chat.models import Document

    with worker_paused(workers.documents):
        body = upload()["document"]
        assert body["kind"] in ("txt", "md"), "hold a text file's reading"
        stored = stored_file(Document.objects.get(id=body["id"]))
        pipe = stored.with_name(f"{stored.name}.held")
        os.mkfifo(pipe)
        os.replace(pipe, stored)
    return body


@contextlib.contextmanager
def group_paused(group: int) -> Iterator[None]:
    """Freeze a process group (SIGSTOP) until the block ends: a worker's task (a download) stops where it
    is, however fast the machine, and goes on from there once the test lets go."""
    import os
    import signal

    os.killpg(group, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(group, signal.SIGCONT)
