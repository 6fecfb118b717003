"""Requests a key may have at once (queued or running) and per minute, counted in Redis across processes.

Each request holds a lease in the key's sorted set while it runs and refreshes it;
a process that dies leaves a lease that runs out, so the count heals by itself.
Requests per minute are a sliding window: one sorted set of the last minute's request times.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from monitor.public import REDIS_DOWN, LoopRedis, sync_redis

log = logging.getLogger(__name__)

# KEYS: the key's lease set; ARGV: ticket, limit, now_ms, lease_ms
_TRY_HOLD = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""


# KEYS: the key's window; ARGV: ticket, limit, now_ms, window_ms. Returns 0, or ms until a place frees.
_TRY_COUNT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[3]) - tonumber(ARGV[4]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(oldest[2]) + tonumber(ARGV[4]) - tonumber(ARGV[3]))
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 0
"""
WINDOW_MS = 60_000


class OverLimit(Exception):
    """The key already has as many requests in flight as its limit allows."""


class TooManyRequests(Exception):
    """The key made its limit of requests in the last minute; ``retry_after_s`` until one more is allowed."""

    def __init__(self, retry_after_s: int):
        super().__init__(retry_after_s)
        self.retry_after_s = retry_after_s


class KeyLimiter:
    def __init__(self, redis_url: str | None = None, *, lease_s: float = 60.0):
        self.redis = LoopRedis(redis_url)
        self.lease_ms = int(lease_s * 1000)

    @staticmethod
    def _set(key_id: int) -> str:
        return f"qwenweb:apikey:{key_id}:inflight"

    @asynccontextmanager
    async def hold(self, key_id: int, limit: int) -> AsyncIterator[None]:
        """One of the key's ``limit`` places for the body of the ``async with``; OverLimit when none is free."""
        ticket = uuid.uuid4().hex
        now = int(time.time() * 1000)
        held = await self.redis.get().eval(_TRY_HOLD, 1, self._set(key_id), ticket, limit, now, self.lease_ms)
        if not int(held):
            raise OverLimit()
        keeper = asyncio.create_task(self._keep_alive(key_id, ticket))
        try:
            yield
        finally:
            keeper.cancel()
            await asyncio.shield(self._give_back(key_id, ticket))

    async def _give_back(self, key_id: int, ticket: str) -> None:
        """The place given back; with Redis restarting, its lease runs out instead (never the answer's failure)."""
        try:
            await self.redis.get().zrem(self._set(key_id), ticket)
        except REDIS_DOWN:
            log.info("key %s: its place comes back with its lease (Redis is not answering)", key_id)

    def count_request(self, key_id: int, per_minute: int) -> None:
        """Count one request of the key; TooManyRequests when it already made ``per_minute`` in the last
        minute. Synchronous: it runs in the database thread that checks the request's key and quota."""
        now = int(time.time() * 1000)
        window = f"qwenweb:apikey:{key_id}:minute"
        wait_ms = sync_redis(self.redis.url).eval(_TRY_COUNT, 1, window, uuid.uuid4().hex, per_minute, now, WINDOW_MS)
        if int(wait_ms):
            raise TooManyRequests(-(-int(wait_ms) // 1000))

    async def _keep_alive(self, key_id: int, ticket: str) -> None:
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            try:
                now = int(time.time() * 1000)
                await self.redis.get().zadd(self._set(key_id), {ticket: now + self.lease_ms})
                await self.redis.get().pexpire(self._set(key_id), self.lease_ms)
            except REDIS_DOWN:  # Redis restarting: the next refresh puts the place back
                continue


@functools.cache
def get_limiter() -> KeyLimiter:
    return KeyLimiter()
