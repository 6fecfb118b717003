"""A fair queue in Redis in front of llama-server's slots, people first.

At most ``capacity`` requests hold a slot at once, across every process (Daphne,
the API gateway, Celery). Each request belongs to a class: ``person`` (a chat turn,
an API call) or ``background`` (a summary's chunks). A waiting person always takes
the next free slot before any background work; background work never holds more
than ``capacity - 1`` slots on a box with several (one stays free for people), and
on a one-slot box it takes the slot only while no person waits (a running chunk
finishes, the next one waits). Within a class, waiting requests are served
round-robin by user (for background work: by the documents' owner), so one user's
burst cannot starve another. A person's place in line counts only people.
Slots are leases that the holder refreshes; a crashed holder's slot comes back when
its lease runs out, and a waiter that stops polling is dropped from the line (if its
process comes back, the waiter joins again at the end).
Every grant is written to a short log (``grants``) so the order of service can be
read back afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

from django.conf import settings
from django.utils.translation import gettext as _

from chat.redis_clients import LoopRedis
from monitor.public import record_queue_overflow

log = logging.getLogger(__name__)

Priority = Literal["person", "background"]
PRIORITIES: tuple[Priority, ...] = ("person", "background")
GRANT_LOG_LENGTH = 200

# KEYS: active-zset, seen-zset, background-active-zset, grant-log
# ARGV: prefix, ticket, user, priority, capacity, now_ms, lease_ms, stale_ms, log_length
_TRY_ACQUIRE = """
local active_key, seen_key, bg_active_key, log_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix, ticket, user, priority = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local capacity, now, lease, stale = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local log_length = tonumber(ARGV[9])

redis.call('ZREMRANGEBYSCORE', active_key, '-inf', now)
redis.call('ZREMRANGEBYSCORE', bg_active_key, '-inf', now)
redis.call('ZADD', seen_key, now, ticket)

-- Drop waiters at the head of a class's line that stopped polling (their process died).
local function drop_stale(users_key, wait_prefix)
  while true do
    local head_user = redis.call('LINDEX', users_key, 0)
    if not head_user then return end
    local head_wait = wait_prefix .. head_user
    local head_ticket = redis.call('LINDEX', head_wait, 0)
    if not head_ticket then
      redis.call('LPOP', users_key)
    else
      local seen = tonumber(redis.call('ZSCORE', seen_key, head_ticket) or '0')
      if seen >= now - stale then return end
      redis.call('LPOP', head_wait)
      redis.call('ZREM', seen_key, head_ticket)
      redis.call('LPOP', users_key)
      if redis.call('LLEN', head_wait) > 0 then redis.call('RPUSH', users_key, head_user) end
    end
  end
end

local function waiting(users_key, wait_prefix)
  local total = 0
  for _, u in ipairs(redis.call('LRANGE', users_key, 0, -1)) do
    total = total + redis.call('LLEN', wait_prefix .. u)
  end
  return total
end

local person_users, person_wait = prefix .. 'users', prefix .. 'wait:'
drop_stale(person_users, person_wait)
drop_stale(prefix .. 'background:users', prefix .. 'background:wait:')

local users_key, wait_prefix = person_users, person_wait
if priority == 'background' then
  users_key, wait_prefix = prefix .. 'background:users', prefix .. 'background:wait:'
end
local my_wait = wait_prefix .. user
local my_index = redis.call('LPOS', my_wait, ticket)
if not my_index then return -1 end

-- Tickets of my class served before mine: each round serves one ticket per user, in rotation order.
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
  local n = redis.call('LLEN', wait_prefix .. u)
  ahead = ahead + math.min(n, my_index)
  if i < my_turn and n > my_index then ahead = ahead + 1 end
end

local free = redis.call('ZCARD', active_key) < capacity
if free and priority == 'background' then
  -- People first: none may be waiting, and one slot stays theirs where there are several.
  local people_waiting = waiting(person_users, person_wait)
  local limit = capacity - 1
  if capacity <= 1 and people_waiting == 0 then limit = 1 end
  free = people_waiting == 0 and redis.call('ZCARD', bg_active_key) < limit
end
if ahead == 0 and free then
  redis.call('LPOP', my_wait)
  redis.call('LREM', users_key, 1, user)
  if redis.call('LLEN', my_wait) > 0 then redis.call('RPUSH', users_key, user) end
  redis.call('ZREM', seen_key, ticket)
  redis.call('ZADD', active_key, now + lease, ticket)
  if priority == 'background' then redis.call('ZADD', bg_active_key, now + lease, ticket) end
  redis.call('LPUSH', log_key, now .. ' ' .. priority .. ' ' .. ticket .. ' ' .. user)
  redis.call('LTRIM', log_key, 0, log_length - 1)
  return 0
end
return ahead + 1
"""

# KEYS: users-list, seen-zset, wait-list, active-zset, background-active-zset; ARGV: ticket, user
# (A slot granted to a waiter that was leaving, its reply in flight, is given back with it.)
_CANCEL = """
redis.call('LREM', KEYS[3], 0, ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
if redis.call('LLEN', KEYS[3]) == 0 then redis.call('LREM', KEYS[1], 0, ARGV[2]) end
return 1
"""

PositionCallback = Callable[[int], Awaitable[None]]


@dataclass(frozen=True)
class Grant:
    """One slot handed out, as the queue logged it."""

    at_ms: int
    priority: str
    ticket: str
    user: str


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

    def _users_key(self, priority: Priority) -> str:
        return self.prefix + ("users" if priority == "person" else "background:users")

    def _wait_key(self, user: str, priority: Priority) -> str:
        return self.prefix + ("wait:" if priority == "person" else "background:wait:") + user

    @property
    def _active_key(self) -> str:
        return self.prefix + "active"

    @property
    def _background_active_key(self) -> str:
        return self.prefix + "background:active"

    @property
    def _seen_key(self) -> str:
        return self.prefix + "seen"

    @property
    def _log_key(self) -> str:
        return self.prefix + "grants"

    async def _try_acquire(
        self, ticket: str, user: str, priority: Priority = "person", capacity: int | None = None
    ) -> int:
        now = int(time.time() * 1000)
        keys = (self._active_key, self._seen_key, self._background_active_key, self._log_key)
        return int(
            await self.redis.get().eval(
                _TRY_ACQUIRE,
                len(keys),
                *keys,
                self.prefix,
                ticket,
                user,
                priority,
                capacity or self.capacity,
                now,
                self.lease_ms,
                self.stale_ms,
                GRANT_LOG_LENGTH,
            )
        )

    async def acquire(
        self,
        user: str,
        on_position: PositionCallback | None = None,
        capacity: int | None = None,
        *,
        priority: Priority = "person",
    ) -> str:
        """Wait for a slot; returns the ticket that holds it. Cancellation leaves the line."""
        if priority not in PRIORITIES:
            raise ValueError(f"unknown queue priority {priority!r}")
        ticket = uuid.uuid4().hex
        last_position = None
        waited_from = time.monotonic()
        task = asyncio.current_task()
        try:
            await self._join(ticket, user, priority)
            while True:
                position = await self._try_acquire(ticket, user, priority, capacity)
                if task is not None and task.cancelling():
                    # A cancellation that landed inside the Redis call can be swallowed there;
                    # the task still knows it was asked to stop.
                    raise asyncio.CancelledError()
                if position == 0:
                    return ticket
                if position < 0:
                    # Dropped as a dead waiter's: this process did not poll for stale_s (its loop
                    # was stuck). It is alive after all: back in line, at the end, and on the timeline.
                    _record_left_line(True, last_position or 1, time.monotonic() - waited_from)
                    await self._join(ticket, user, priority)
                    continue
                if position != last_position:
                    last_position = position
                    if on_position:
                        await on_position(position)
                await asyncio.sleep(self.poll_s)
        except BaseException:
            await asyncio.shield(self._cancel(ticket, user, priority))
            if last_position is not None:  # it stood in line behind others and left without a slot
                _record_left_line(False, last_position, time.monotonic() - waited_from)
            raise

    async def _join(self, ticket: str, user: str, priority: Priority) -> None:
        """Put the ticket at the end of its user's line, seen as it joins: another process's
        poll must not take it for a dead waiter's before its own first poll."""
        async with self.redis.get().pipeline(transaction=True) as pipe:
            pipe.zadd(self._seen_key, {ticket: int(time.time() * 1000)})
            pipe.rpush(self._wait_key(user, priority), ticket)
            await pipe.execute()

    async def _cancel(self, ticket: str, user: str, priority: Priority) -> None:
        await self.redis.get().eval(
            _CANCEL,
            5,
            self._users_key(priority),
            self._seen_key,
            self._wait_key(user, priority),
            self._active_key,
            self._background_active_key,
            ticket,
            user,
        )

    async def refresh(self, ticket: str) -> None:
        now = int(time.time() * 1000)
        async with self.redis.get().pipeline(transaction=True) as pipe:
            pipe.zadd(self._active_key, {ticket: now + self.lease_ms}, xx=True)
            pipe.zadd(self._background_active_key, {ticket: now + self.lease_ms}, xx=True)
            await pipe.execute()

    async def release(self, ticket: str) -> None:
        async with self.redis.get().pipeline(transaction=True) as pipe:
            pipe.zrem(self._active_key, ticket)
            pipe.zrem(self._background_active_key, ticket)
            await pipe.execute()

    async def active_count(self, priority: Priority | None = None) -> int:
        """Slots held now (by one class only when ``priority`` is given)."""
        now = int(time.time() * 1000)
        client = self.redis.get()
        total = int(await client.zcount(self._active_key, now, "+inf"))
        if priority is None:
            return total
        background = int(await client.zcount(self._background_active_key, now, "+inf"))
        return background if priority == "background" else total - background

    async def waiting_count(self, priority: Priority | None = None) -> int:
        """Requests in line (of one class only when ``priority`` is given)."""
        client = self.redis.get()
        total = 0
        for klass in (priority,) if priority else PRIORITIES:
            for user in await client.lrange(self._users_key(klass), 0, -1):
                total += await client.llen(self._wait_key(user.decode(), klass))
        return total

    async def grants(self, limit: int = GRANT_LOG_LENGTH) -> list[Grant]:
        """The last slots handed out, oldest first."""
        entries = await self.redis.get().lrange(self._log_key, 0, limit - 1)
        grants = []
        for entry in reversed(entries):
            at_ms, priority, ticket, user = entry.decode().split(" ", 3)
            grants.append(Grant(int(at_ms), priority, ticket, user))
        return grants

    @asynccontextmanager
    async def slot(
        self,
        user: str,
        on_position: PositionCallback | None = None,
        capacity: int | None = None,
        *,
        priority: Priority = "person",
    ) -> AsyncIterator[str]:
        """Hold a slot for the body of the ``async with``; refreshed while held.

        ``capacity`` is the serving llama-server's slot count when known (it follows
        the profile), else the configured QUEUE_CAPACITY. ``priority``: ``person`` for
        a chat turn or an API call, ``background`` for work nobody is watching live."""
        ticket = await self.acquire(user, on_position, capacity, priority=priority)
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


def _record_left_line(lost: bool, position: int, waited_s: float) -> None:
    """Recorded beside, not awaited: leaving (or re-joining) the line stays exactly as it was."""
    record = asyncio.get_running_loop().create_task(_record_overflow(lost, position, waited_s))
    recording.add(record)
    record.add_done_callback(recording.discard)


async def _record_overflow(lost: bool, position: int, waited_s: float) -> None:
    """Put a request that left the line without a slot (or lost its place in it) on the dashboard's timeline."""
    if lost:
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


def background_queue(name: str = "llama") -> FairQueue:
    """A profile's fair queue (same slots, same line) for a worker's background work, with short
    leases: a killed worker's slots come back soon. One per run: it closes with the run's loop."""
    return FairQueue(name=name, lease_s=10.0)


def get_queue(name: str = "llama") -> FairQueue:
    """The queue in front of one llama-server instance (one per server profile)."""
    queue = _queues.get(name)
    if queue is None:
        queue = _queues[name] = FairQueue(name=name, lease_s=settings.QUEUE_LEASE_S)
    return queue
