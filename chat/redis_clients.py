"""One Redis client per event loop, for the parts of chat that keep state in Redis.

An asyncio Redis connection belongs to the loop that opened it: Daphne has one loop,
but each Celery task runs its own (``asyncio.run``), so clients are kept per loop.
"""

from __future__ import annotations

import asyncio
import time

import redis
import redis.asyncio as aioredis
from django.conf import settings


class LoopRedis:
    def __init__(self, url: str | None = None):
        self.url = url or settings.REDIS_URL
        self._clients: dict[asyncio.AbstractEventLoop, aioredis.Redis] = {}

    def get(self) -> aioredis.Redis:
        """The running loop's client, opened on first use."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = aioredis.Redis.from_url(self.url)
        return client

    async def drop_current(self) -> None:
        """Close the running loop's client (a Celery task's loop ends with its task)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()


_sync_clients: dict[str, redis.Redis] = {}


SYNC_TIMEOUT_S = 5.0


def sync_client(url: str | None = None) -> redis.Redis:
    """A blocking client for sync code (services called from threads); thread-safe, one per URL.
    Its calls are short (counters, scripts) and run in the database thread that chat sockets and
    API calls share: a Redis that stops answering raises after SYNC_TIMEOUT_S, it never holds that
    thread for good."""
    url = url or settings.REDIS_URL
    client = _sync_clients.get(url)
    if client is None:
        client = _sync_clients[url] = redis.Redis.from_url(
            url, socket_timeout=SYNC_TIMEOUT_S, socket_connect_timeout=SYNC_TIMEOUT_S
        )
    return client


def count_in_window(name: str, window_s: int) -> int:
    """Add one to ``name``'s counter for the current clock window of ``window_s`` seconds; returns the
    window's count so far (the counter lives two windows, then Redis drops it)."""
    key = f"{name}:{int(time.time() // window_s)}"
    pipe = sync_client().pipeline()
    pipe.incr(key)
    pipe.expire(key, 2 * window_s)
    count, _expiry = pipe.execute()
    return int(count)
