"""A fair queue in Redis in front of llama-server's slots.

At most ``capacity`` requests hold a slot at once, across every process (Daphne,
the API gateway, Celery). Waiting requests are served round-robin by user: each
user with waiting requests gets one turn per round, so one user's burst cannot
starve another. Slots are leases that the holder refreshes; a crashed holder's
slot comes back when its lease runs out, and a waiter that stops polling is
dropped from the line.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from django.conf import settings
from django.utils.translation import gettext as _

from chat.redis_clients import LoopRedis
from monitor.public import record_queue_overflow

log = logging.getLogger(__name__)

# KEYS: users-list, active-zset, seen-zset; ARGV: prefix, ticket, user, capacity, now_ms, lease_ms, stale_ms
_TRY_ACQUIRE = """
local users_key, active_key, seen_key = KEYS[1], KEYS[2], KEYS[3]
local prefix, ticket, user = ARGV[1], ARGV[2], ARGV[3]
local capacity, now, lease, stale = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

redis.call('ZREMRANGEBYSCORE', active_key, '-inf', now)
redis.call('ZADD', seen_key, now, ticket)

-- Drop waiters at the head of the line that stopped polling (their process died).
while true do
  local head_user = redis.call('LINDEX', users_key, 0)
  if not head_user then break end
  local head_wait = prefix .. 'wait:' .. head_user
  local head_ticket = redis.call('LINDEX', head_wait, 0)
  if not head_ticket then
    redis.call('LPOP', users_key)
  else
    local seen = tonumber(redis.call('ZSCORE', seen_key, head_ticket) or '0')
    if seen >= now - stale then break end
    redis.call('LPOP', head_wait)
    redis.call('ZREM', seen_key, head_ticket)
    redis.call('LPOP', users_key)
    if redis.call('LLEN', head_wait) > 0 then redis.call('RPUSH', users_key, head_user) end
  end
end

local my_wait = prefix .. 'wait:' .. user
local my_index = redis.call('LPOS', my_wait, ticket)
if not my_index then return -1 end

-- Tickets served before mine: each round serves one ticket per user, in rotation order.
local users = redis.call('LRANGE', users_key, 0, -1)
local my_turn = nil
for i, u in ipairs(users) do if u == user then my_turn = i end end
if not my_turn then
  redis.call('RPUSH', users_key, user)
  users[#users + 1] = user
  my_turn = #users
end
local ahead = 0
for i, u in ipairs(users) do
  local n = redis.call('LLEN', prefix .. 'wait:' .. u)
  ahead = ahead + math.min(n, my_index)
  if i < my_turn and n > my_index then ahead = ahead + 1 end
end

if ahead == 0 and redis.call('ZCARD', active_key) < capacity then
  redis.call('LPOP', my_wait)
  redis.call('LPOP', users_key)
  if redis.call('LLEN', my_wait) > 0 then redis.call('RPUSH', users_key, user) end
  redis.call('ZREM', seen_key, ticket)
  redis.call('ZADD', active_key, now + lease, ticket)
  return 0
end
return ahead + 1
"""

# KEYS: users-list, seen-zset, wait-list; ARGV: ticket, user
_CANCEL = """
redis.call('LREM', KEYS[3], 0, ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('LLEN', KEYS[3]) == 0 then redis.call('LREM', KEYS[1], 0, ARGV[2]) end
return 1
"""

PositionCallback = Callable[[int], Awaitable[None]]


class QueueTicketLost(Exception):
    """The ticket vanished from the line (dropped as stale); the caller should retry."""


class FairQueue:
    def __init__(
        self,
        redis_url: str | None = None,
        *,
        name: str = "llama",
        capacity: int | None = None,
        lease_s: float = 60.0,
        poll_s: float = 0.05,
        stale_s: float = 15.0,
    ):
        self.redis = LoopRedis(redis_url)
        self.prefix = f"qwenweb:queue:{name}:"
        self.capacity = capacity if capacity is not None else settings.QUEUE_CAPACITY
        self.lease_ms = int(lease_s * 1000)
        self.poll_s = poll_s
        self.stale_ms = int(stale_s * 1000)

    async def aclose(self) -> None:
        """Close this loop's Redis connection (a Celery task's loop ends with its task)."""
        await self.redis.drop_current()

    @property
    def _users_key(self) -> str:
        return self.prefix + "users"

    @property
    def _active_key(self) -> str:
        return self.prefix + "active"

    @property
    def _seen_key(self) -> str:
        return self.prefix + "seen"

    def _wait_key(self, user: str) -> str:
        return f"{self.prefix}wait:{user}"

    async def _try_acquire(self, ticket: str, user: str, capacity: int | None = None) -> int:
        now = int(time.time() * 1000)
        return int(
            await self.redis.get().eval(
                _TRY_ACQUIRE,
                3,
                self._users_key,
                self._active_key,
                self._seen_key,
                self.prefix,
                ticket,
                user,
                capacity or self.capacity,
                now,
                self.lease_ms,
                self.stale_ms,
            )
        )

    async def acquire(self, user: str, on_position: PositionCallback | None = None, capacity: int | None = None) -> str:
        """Wait for a slot; returns the ticket that holds it. Cancellation leaves the line."""
        ticket = uuid.uuid4().hex
        client = self.redis.get()
        await client.rpush(self._wait_key(user), ticket)
        last_position = None
        waited_from = time.monotonic()
        task = asyncio.current_task()
        try:
            while True:
                position = await self._try_acquire(ticket, user, capacity)
                if task is not None and task.cancelling():
                    # A cancellation that landed inside the Redis call can be swallowed there;
                    # the task still knows it was asked to stop.
                    raise asyncio.CancelledError()
                if position == 0:
                    return ticket
                if position < 0:
                    raise QueueTicketLost()
                if position != last_position:
                    last_position = position
                    if on_position:
                        await on_position(position)
                await asyncio.sleep(self.poll_s)
        except BaseException as error:
            await asyncio.shield(self._cancel(ticket, user))
            if last_position is not None:  # it stood in line behind others and left without a slot
                # Recorded beside, not awaited here: leaving the line stays exactly as it was.
                record = asyncio.get_running_loop().create_task(
                    _record_overflow(error, last_position, time.monotonic() - waited_from)
                )
                recording.add(record)
                record.add_done_callback(recording.discard)
            raise

    async def _cancel(self, ticket: str, user: str) -> None:
        await self.redis.get().eval(_CANCEL, 3, self._users_key, self._seen_key, self._wait_key(user), ticket, user)

    async def refresh(self, ticket: str) -> None:
        now = int(time.time() * 1000)
        await self.redis.get().zadd(self._active_key, {ticket: now + self.lease_ms}, xx=True)

    async def release(self, ticket: str) -> None:
        await self.redis.get().zrem(self._active_key, ticket)

    async def active_count(self) -> int:
        now = int(time.time() * 1000)
        return int(await self.redis.get().zcount(self._active_key, now, "+inf"))

    async def waiting_count(self) -> int:
        client = self.redis.get()
        users = await client.lrange(self._users_key, 0, -1)
        total = 0
        for user in users:
            total += await client.llen(self._wait_key(user.decode()))
        return total

    @asynccontextmanager
    async def slot(
        self, user: str, on_position: PositionCallback | None = None, capacity: int | None = None
    ) -> AsyncIterator[str]:
        """Hold a slot for the body of the ``async with``; refreshed while held.

        ``capacity`` is the serving llama-server's slot count when known (it follows
        the profile), else the configured QUEUE_CAPACITY."""
        ticket = await self.acquire(user, on_position, capacity)
        keeper = asyncio.create_task(self._keep_alive(ticket))
        try:
            yield ticket
        finally:
            keeper.cancel()
            await asyncio.shield(self.release(ticket))

    async def _keep_alive(self, ticket: str) -> None:
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            await self.refresh(ticket)


# Timeline writes in flight (kept so they are not garbage-collected half-way).
recording: set[asyncio.Task] = set()


async def _record_overflow(error: BaseException, position: int, waited_s: float) -> None:
    """Put a request that left the line without a slot on the dashboard's timeline."""
    if isinstance(error, QueueTicketLost):
        message = _("A request lost its place in the queue (position %(position)d) after %(seconds).0f s.")
    else:
        message = _("A request gave up waiting in the queue at position %(position)d after %(seconds).0f s.")
    try:
        await record_queue_overflow(
            message % {"position": position, "seconds": waited_s}, position=position, waited_s=round(waited_s, 1)
        )
    except Exception:  # the timeline is a record, never a reason to fail a request
        log.warning("could not record a queue event", exc_info=True)


_queues: dict[str, FairQueue] = {}


def get_queue(name: str = "llama") -> FairQueue:
    """The queue in front of one llama-server instance (one per server profile)."""
    queue = _queues.get(name)
    if queue is None:
        queue = _queues[name] = FairQueue(name=name, lease_s=settings.QUEUE_LEASE_S)
    return queue
