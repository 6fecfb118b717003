"""Redis clients for every part that keeps state in Redis: one asyncio client per event loop, one
blocking client per URL; and counters in clock windows.

An asyncio Redis connection belongs to the loop that opened it: Daphne has one loop,
but each Celery task runs its own (``asyncio.run``), so clients are kept per loop.
``chat`` reaches these through ``monitor.public``.
"""

from __future__ import annotations

import asyncio
import functools
import time

import redis
import redis.asyncio as aioredis
import redis.exceptions
from django.conf import settings

# What a Redis that is restarting (or away) raises: callers that must outlive it catch these.
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def raise_if_cancelling(task: asyncio.Task | None) -> None:
    """Raise CancelledError when ``task`` is being cancelled: for loops that ride out ``REDIS_DOWN``.
    redis-py can end a command that its closing connection cut in a connection error instead of the
    cancellation, and such a loop would take it for an outage and go on after its task was cancelled."""
    if task is not None and task.cancelling():
        raise asyncio.CancelledError() from None


_loop_clients: dict[tuple[str, asyncio.AbstractEventLoop], aioredis.Redis] = {}


class LoopRedis:
    """The running event loop's client for one Redis URL (shared by every ``LoopRedis`` of that URL)."""

    def __init__(self, url: str | None = None):
        self._url = url

    @property
    def url(self) -> str:
        return self._url or settings.REDIS_URL

    def get(self) -> aioredis.Redis:
        """The running loop's client, opened on first use."""
        key = (self.url, asyncio.get_running_loop())
        client = _loop_clients.get(key)
        if client is None:
            for old in [old for old in _loop_clients if old[1].is_closed()]:
                del _loop_clients[old]  # a finished asyncio.run(): its client went with its loop
            client = _loop_clients[key] = aioredis.Redis.from_url(self.url)
        return client


async def close_loop_clients() -> None:
    """Close every Redis client of the running loop: the end of a Celery task's ``asyncio.run``."""
    loop = asyncio.get_running_loop()
    for key in [key for key in _loop_clients if key[1] is loop]:
        await _loop_clients.pop(key).aclose()


SYNC_TIMEOUT_S = 5.0


def sync_client(url: str | None = None, timeout_s: float = SYNC_TIMEOUT_S) -> redis.Redis:
    """A blocking client for sync code (services called from threads); thread-safe, one per URL and timeout.
    Its calls are short (counters, scripts) and run in the database thread that chat sockets and
    API calls share: a Redis that stops answering raises after SYNC_TIMEOUT_S, it never holds that
    thread for good. The health checks ask with their own timeout."""
    return _blocking_client(url or settings.REDIS_URL, timeout_s)


@functools.cache
def _blocking_client(url: str, timeout_s: float) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)


def count_in_window(name: str, window_s: int) -> int:
    """Add one to ``name``'s counter for the current clock window of ``window_s`` seconds; returns the
    window's count so far (the counter lives two windows, then Redis drops it). Every process shares it:
    chat turns a minute, sign-ups and node joins an hour per address."""
    key = f"{name}:{int(time.time() // window_s)}"
    count, _expiry = sync_client().pipeline().incr(key).expire(key, 2 * window_s).execute()
    return int(count)
