"""The fair queue in Redis in front of a pool's slots (a profile's slots on every node that serves it).

At most the pool's slots are held at once, across every process (Daphne, the API gateway, Celery)
and every host. A request is a ``person`` (a chat turn, an API call) or ``background`` (a summary's
chunk, a scanned page the model reads): a waiting person takes the next free slot before any
background work; background work never holds the last free slot of a pool with several, and on a
one-slot pool runs only while no person waits. Within a class, owners take turns (round-robin), so
one person's burst cannot starve another; a person's place in line counts people only.

The decisions are made in one Lua script (``queue.lua``), atomically, each time something changes:
a request joins, leaves or is done. A waiter blocks on its own wake list (BLPOP) and is woken by the
grant itself; it looks again on its own every ``QWENWEB_QUEUE_POLL_S`` only as a fallback (a lost
wake-up, a node coming back, its patience for a busy node running out).

Slots are leases, refreshed by one keeper per event loop (``leases.py``). Redis may restart while
answers stream: a refresh or a release that fails is retried, never the answer's failure; refreshes
put back what a restarted Redis lost, and the script hands nothing out until its holders have had the
time to (so a slot is never given twice). A request that arrives while Redis is down waits for it
(``QWENWEB_QUEUE_REDIS_WAIT_S``). A holder that stops refreshing (a frozen process) loses its slots
when its lease runs out; a process that died has them freed by its successor at start-up
(``holders``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils.translation import gettext as _

from monitor import timeline
from monitor.models import Event
from monitor.redis_clients import REDIS_DOWN, LoopRedis, raise_if_cancelling, sync_client
from monitor.serving.holders import process_holder, release_gone_predecessors, set_process_kind
from monitor.serving.leases import OUTAGE_RETRY_S, keeper

log = logging.getLogger(__name__)

Priority = Literal["person", "background"]
PRIORITIES: tuple[Priority, ...] = ("person", "background")
GRANT_LOG_LENGTH = 200
SCRIPT = (Path(__file__).with_name("queue.lua")).read_text()

PositionCallback = Callable[[int], Awaitable[None]]
Nodes = Iterable[str] | Callable[[], Awaitable[list[str]]]


class QueueUnavailable(Exception):
    """Redis did not come back within QWENWEB_QUEUE_REDIS_WAIT_S while a request needed the queue."""

    def __init__(self) -> None:
        super().__init__(_("The request queue is not reachable right now."))


@dataclass(frozen=True)
class Grant:
    """A slot held: its ticket, the node it is on and the model id that node serves the pool as."""

    ticket: str
    node: str
    model: str
    owner: str
    priority: Priority
    nodes: tuple[str, ...] = field(default=(), compare=False)


class FairQueue:
    """The queue of one pool (named after its profile)."""

    def __init__(
        self,
        name: str = "llama",
        *,
        lease_s: float | None = None,
        poll_s: float | None = None,
        stale_s: float | None = None,
        redis_url: str | None = None,
    ):
        self.name = name
        self.redis = LoopRedis(redis_url)
        self.prefix = f"qwenweb:queue:{name}:"
        self.lease_ms = int((lease_s or settings.QUEUE_LEASE_S) * 1000)
        self.poll_s = poll_s or settings.QUEUE_POLL_S
        self.stale_ms = int((stale_s or settings.QUEUE_STALE_S) * 1000)

    # ------------------------------------------------------------------ the script

    async def _run(self, op: str, nodes: Iterable[str], *args) -> object:
        names = list(nodes)
        return await self.redis.get().eval(
            SCRIPT,
            0,
            op,
            self.prefix,
            self.name,
            self.lease_ms,
            self.stale_ms,
            settings.QUEUE_GRACE_S,
            GRANT_LOG_LENGTH,
            len(names),
            *names,
            *args,
        )

    async def _patiently(self, call: Callable[[], Awaitable]) -> object:
        """``call()``, retried while Redis is down (restarting); QueueUnavailable after the limit."""
        deadline = time.monotonic() + settings.QUEUE_REDIS_WAIT_S
        while True:
            try:
                return await call()
            except REDIS_DOWN:
                if time.monotonic() > deadline:
                    raise QueueUnavailable() from None
                await asyncio.sleep(OUTAGE_RETRY_S)

    # ------------------------------------------------------------------ taking and giving back

    async def acquire(
        self,
        owner: str,
        nodes: Nodes,
        *,
        priority: Priority = "person",
        affinity: str = "",
        patience_s: float = 0.0,
        on_position: PositionCallback | None = None,
    ) -> Grant:
        """Wait for a slot on one of ``nodes`` (names, or an async function giving them as of now).

        ``affinity``: the node this request would rather have (it holds the conversation's cache);
        it waits up to ``patience_s`` for it while other nodes are free. Cancellation leaves the line.
        """
        if priority not in PRIORITIES:
            raise ValueError(f"unknown queue priority {priority!r}")
        ticket = uuid.uuid4().hex
        holder = process_holder()
        patience_ms = int(max(patience_s, 0) * 1000)
        last_position = None
        waited_from = time.monotonic()
        task = asyncio.current_task()
        names = await _names(nodes)

        async def join() -> str:
            args = (ticket, owner, priority, holder, affinity, patience_ms)
            return _text(await self._run("join", names, *args))

        try:
            state = await self._patiently(join)
            while True:
                raise_if_cancelling(task)  # a cancellation swallowed inside a Redis call
                kind, _sep, rest = state.partition(" ")
                if kind == "g":
                    node, _sep, model = rest.partition(" ")
                    grant = Grant(ticket, node, model, owner, priority, tuple(names))
                    keeper().hold(self, grant)
                    return grant
                if kind == "x":  # dropped from the line (this process was stuck), or Redis lost it
                    _record_left_line(True, last_position or 1, time.monotonic() - waited_from)
                    state = await self._patiently(join)
                    continue
                position = int(rest or 0)
                if position and position != last_position:
                    last_position = position
                    if on_position:
                        await on_position(position)
                news = await self._wait(ticket, self._wait_s(affinity, patience_ms, waited_from))
                if news is None:
                    names = await _names(nodes)
                    state = await self._patiently(functools.partial(self._poll, names, ticket))
                else:
                    state = news
        except BaseException:
            await asyncio.shield(self._leave_or_later(ticket, names, owner, priority))
            if last_position is not None:  # it stood in line behind others and left without a slot
                _record_left_line(False, last_position, time.monotonic() - waited_from)
            raise

    def _wait_s(self, affinity: str, patience_ms: int, waited_from: float) -> float:
        """How long to sleep on the wake list: the fallback poll, or until a follow-up's patience ends."""
        if affinity:
            left = patience_ms / 1000 - (time.monotonic() - waited_from)
            if left > 0:
                return min(self.poll_s, left + 0.05)
        return self.poll_s

    async def _poll(self, names: list[str], ticket: str) -> str:
        return _text(await self._run("poll", names, ticket))

    async def _wait(self, ticket: str, timeout_s: float) -> str | None:
        """The next message on the ticket's wake list, or None after ``timeout_s`` (or an outage)."""
        try:
            reply = await self.redis.get().blpop([self.prefix + "wake:" + ticket], timeout=timeout_s)
        except REDIS_DOWN:
            await asyncio.sleep(OUTAGE_RETRY_S)
            return None
        return None if reply is None else _text(reply[1])

    async def release(self, grant: Grant) -> None:
        """Give the slot back; the next in line is woken. Never raises: when Redis is down it is given
        back once Redis answers again (or its lease runs out meanwhile)."""
        keeper().drop(grant.ticket)
        await self._leave_or_later(grant.ticket, grant.nodes, grant.owner, grant.priority)

    async def _leave_or_later(self, ticket: str, nodes: Iterable[str], owner: str, priority: Priority) -> None:
        try:
            await self.leave(ticket, nodes)
        except REDIS_DOWN:
            keeper().leave_later(self, ticket, tuple(nodes))
        except Exception:
            log.warning("queue %s: could not give back ticket %s", self.name, ticket, exc_info=True)

    async def leave(self, ticket: str, nodes: Iterable[str]) -> None:
        """The ticket leaves the line or gives its slot back (raises while Redis is down)."""
        await self._run("leave", nodes, ticket)

    async def refresh(self, grants: list[Grant]) -> list[str]:
        """Extend held leases (put them back after a Redis restart): ``ok`` or ``expired`` for each."""
        args: list = [len(grants)]
        holder = process_holder()
        for grant in grants:
            args += [grant.ticket, grant.owner, grant.priority, holder, grant.node, grant.model]
        return [_text(answer) for answer in await self._run("refresh", (), *args)]


def drop_holder(holder: str) -> int:
    """Free every ticket of a process that is gone, in every pool; synchronous, for start-up."""
    return int(sync_client().eval(SCRIPT, 0, "drop_holder", "", "", 0, 0, 0, 0, 0, holder))


def free_slots_of_gone_predecessors(kind: str) -> int:
    """At a process's start-up: it is a ``kind`` (web, a worker...); the slots and places in line of the
    processes of that kind on this host that are gone are freed now. Returns how many."""
    set_process_kind(kind)
    try:
        return release_gone_predecessors(drop_holder)
    except REDIS_DOWN:
        log.warning("Redis is not answering: the slots of a process that is gone come back with their leases")
        return 0


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def _names(nodes: Nodes) -> list[str]:
    if callable(nodes):
        return list(await nodes())
    return list(nodes)


# ---------------------------------------------------------------------- the timeline

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
        await sync_to_async(timeline.record)(
            Event.Kind.QUEUE_OVERFLOW,
            message % {"position": position, "seconds": waited_s},
            level=Event.Level.WARNING,
            position=position,
            waited_s=round(waited_s, 1),
        )
    except Exception:  # the timeline is a record, never a reason to fail a request
        log.warning("could not record a queue event", exc_info=True)
