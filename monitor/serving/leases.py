"""Keeping queue slots: one keeper per event loop refreshes every lease that loop holds, every
``QWENWEB_QUEUE_REFRESH_S``, in one call per pool, and retries what an outage of Redis made fail
(refreshes, give-backs) without failing any answer.

After a Redis restart its refreshes put the leases back (see ``queue.lua``), and they must come within
the script's grace (``QWENWEB_QUEUE_GRACE_S``, 2 s of Redis's uptime) or a slot could be given twice.
The keeper does not refresh every second for that: while it holds leases it keeps one connection per
Redis blocked on a list nothing is pushed to (BLPOP, no CPU), and that connection's end (Redis went
away) makes it refresh at once, and again every ``OUTAGE_RETRY_S`` until Redis answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from typing import Protocol

import redis.asyncio as aioredis
from django.conf import settings
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from monitor.redis_clients import REDIS_DOWN, SYNC_TIMEOUT_S, LoopRedis, raise_if_cancelling

log = logging.getLogger(__name__)
OUTAGE_RETRY_S = 0.25
WATCH_KEY = "qwenweb:leases:watch"  # nothing is ever pushed to it: a BLPOP on it ends only with its connection


class Grant(Protocol):
    ticket: str


class FairQueue(Protocol):
    """What the keeper needs of a queue (``monitor.serving.queue.FairQueue``)."""

    name: str
    lease_ms: int
    redis: LoopRedis

    async def refresh(self, grants: list[Grant]) -> list[str]: ...

    async def leave(self, ticket: str, nodes: Iterable[str]) -> None: ...


class _Keeper:
    """Refreshes every lease this event loop holds, in one call per pool, every QUEUE_REFRESH_S and at
    once when a Redis it holds leases in went away; retries the refreshes and give-backs that an outage
    of Redis made fail, without failing any answer."""

    def __init__(self) -> None:
        self.held: dict[str, tuple[FairQueue, Grant]] = {}
        self.leaving: dict[str, tuple[FairQueue, tuple[str, ...], float]] = {}
        self.task: asyncio.Task | None = None
        self.watchers: dict[str, asyncio.Task] = {}  # Redis URL -> its watcher
        self.redis_lost = asyncio.Event()

    def hold(self, queue: FairQueue, grant: Grant) -> None:
        self.held[grant.ticket] = (queue, grant)
        self._ensure_running()

    def drop(self, ticket: str) -> None:
        self.held.pop(ticket, None)

    def leave_later(self, queue: FairQueue, ticket: str, nodes: tuple[str, ...]) -> None:
        # After a lease's length the slot has come back by itself: no need to keep trying.
        self.leaving[ticket] = (queue, nodes, time.monotonic() + queue.lease_ms / 1000)
        self._ensure_running()

    def _ensure_running(self) -> None:
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    def _refresh_pause_s(self) -> float:
        """Every QUEUE_REFRESH_S, and at least three times per the shortest lease held: a refresh that
        comes late (a busy loop) must still come before the lease runs out."""
        return min([settings.QUEUE_REFRESH_S, *(queue.lease_ms / 3000 for queue, _grant in self.held.values())])

    async def _run(self) -> None:
        try:
            await self._keep()
        finally:  # nothing awaited here: a hold() from now on starts a new keeper
            for watcher in self.watchers.values():
                watcher.cancel()  # it closes its connection itself
            self.watchers.clear()

    async def _keep(self) -> None:
        pause = self._refresh_pause_s()
        outage_logged = False
        task = asyncio.current_task()
        while self.held or self.leaving:
            self._watch_held()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(pause):
                    await self.redis_lost.wait()
            self.redis_lost.clear()
            try:
                await self._refresh_all()
                await self._leave_all()
            except REDIS_DOWN:
                # Refreshing on after a cancellation would keep the leases of a holder that is gone.
                raise_if_cancelling(task)
                if not outage_logged:
                    log.warning("Redis is not answering: queue leases are kept here and put back when it is")
                    outage_logged = True
                pause = OUTAGE_RETRY_S
                continue
            except Exception:
                log.warning("could not refresh queue leases", exc_info=True)
            if outage_logged:
                log.warning("Redis answers again: queue leases put back")
                outage_logged = False
            pause = self._refresh_pause_s()

    def _watch_held(self) -> None:
        """One watcher for each Redis that holds a lease of this loop's; those no longer needed end (one
        that ended on an error it could not ride out is not started again: the clock goes on)."""
        urls = {queue.redis.url for queue, _grant in self.held.values()}
        for url in list(self.watchers):
            if url not in urls:
                self.watchers.pop(url).cancel()
        for url in urls - self.watchers.keys():
            self.watchers[url] = asyncio.get_running_loop().create_task(self._watch(url))

    async def _watch(self, url: str) -> None:
        """Block on WATCH_KEY on a connection of its own (no retries: its end must be seen, not hidden
        by a reconnection; no read timeout: it waits for good). When it ends, Redis went away (a restart
        loses the leases): the keeper is woken to refresh at once, and the watch starts again once Redis
        answers."""
        client = aioredis.Redis.from_url(
            url,
            retry=Retry(NoBackoff(), 0),
            single_connection_client=True,
            socket_timeout=None,  # redis-py's default (5 s) would end the BLPOP, and reconnect, every 5 s
            socket_connect_timeout=SYNC_TIMEOUT_S,
        )
        task = asyncio.current_task()
        try:
            while True:
                try:
                    await client.blpop([WATCH_KEY], timeout=0)
                except REDIS_DOWN:
                    raise_if_cancelling(task)
                    self.redis_lost.set()
                    await asyncio.sleep(OUTAGE_RETRY_S)
                except Exception:
                    log.warning(
                        "could not watch Redis for restarts: leases refreshed on their clock only", exc_info=True
                    )
                    return
        finally:
            await client.aclose()

    async def _refresh_all(self) -> None:
        by_queue: dict[FairQueue, list[Grant]] = {}
        for queue, grant in list(self.held.values()):
            by_queue.setdefault(queue, []).append(grant)
        for queue, grants in by_queue.items():
            for grant, answer in zip(grants, await queue.refresh(grants), strict=True):
                if answer == "expired" and self.held.pop(grant.ticket, None):
                    log.warning("queue %s: the lease of %s ran out while it was held", queue.name, grant.ticket)

    async def _leave_all(self) -> None:
        now = time.monotonic()
        for ticket, (queue, nodes, until) in list(self.leaving.items()):
            if now < until:
                await queue.leave(ticket, nodes)
            del self.leaving[ticket]


_keepers: dict[asyncio.AbstractEventLoop, _Keeper] = {}


def keeper() -> _Keeper:
    """The running loop's lease keeper."""
    loop = asyncio.get_running_loop()
    current = _keepers.get(loop)
    if current is None:
        for other in [other for other in _keepers if other.is_closed()]:
            del _keepers[other]
        current = _keepers[loop] = _Keeper()
    return current
