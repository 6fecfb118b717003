"""Awaiting work that may never end by itself: the one helper that waits for it while checking, every so
often, that whatever it waits on is still alive (a model server answering a check, a document its owner
has not stopped), and gives up when it is not."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def await_while_alive(
    work: Awaitable[T], alive: Callable[[], Awaitable[bool]], every_s: float, gone: Callable[[], BaseException]
) -> T:
    """The work's result; every ``every_s`` seconds without it, ``alive()`` is asked, and when it says no
    the work is cancelled and ``gone()`` raised. The work is cancelled too when the waiter is."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _pending = await asyncio.wait({task}, timeout=every_s)
            if done:
                return task.result()
            if not await alive():
                raise gone()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
