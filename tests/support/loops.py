"""Async code run from a test: on a loop of its own, as a request's or a worker's would be."""

from __future__ import annotations

import asyncio

from monitor.redis_clients import close_loop_clients


def run(work):
    """``work`` (a coroutine) run to its end on a loop of its own, that loop's Redis client closed after."""

    async def run_and_close():
        try:
            return await work
        finally:
            await close_loop_clients()

    return asyncio.run(run_and_close())
