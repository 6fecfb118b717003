"""Hold points a test releases itself, so no test races the model's speed."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

from chat.queue import FairQueue, Priority


@contextlib.contextmanager
def queue_slots_held(
    queue_name: str, count: int, *, capacity: int | None = None, priority: Priority = "person"
) -> Iterator[None]:
    """Take ``count`` slots of a profile's real fair queue (in Redis) until the block ends.

    Work queued behind them (a summary's chunks, a chat turn) waits in line, however fast
    the machine or the model, until the test leaves the block. ``priority="background"``
    holds them as a summary's running chunks would (``capacity``: the queue's slot count).
    """
    held, release = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    async def hold() -> None:
        queue = FairQueue(name=queue_name, capacity=capacity or count)
        try:
            async with contextlib.AsyncExitStack() as slots:
                for index in range(count):
                    await slots.enter_async_context(
                        queue.slot(f"test-hold-{index}", capacity=capacity or count, priority=priority)
                    )
                held.set()
                await asyncio.to_thread(release.wait)
        finally:
            await queue.aclose()

    def run() -> None:
        try:
            asyncio.run(hold())
        except BaseException as error:  # reported to the test below
            failure.append(error)
            held.set()

    thread = threading.Thread(target=run, name=f"hold-{queue_name}", daemon=True)
    thread.start()
    assert held.wait(30), "could not take the queue's slots"
    if failure:
        raise failure[0]
    try:
        yield
    finally:
        release.set()
        thread.join(30)


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
