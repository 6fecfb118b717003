"""Keeping queue slots: one keeper per event loop refreshes every lease that loop holds, once a second,
in one call per pool, and retries what an outage of Redis made fail (refreshes, give-backs) without
failing any answer. After a Redis restart its refreshes put the leases back (see ``queue.lua``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Protocol

from django.conf import settings

from monitor.redis_clients import REDIS_DOWN, raise_if_cancelling

log = logging.getLogger(__name__)
OUTAGE_RETRY_S = 0.25


class Grant(Protocol):
    ticket: str


class FairQueue(Protocol):
    """What the keeper needs of a queue (``monitor.serving.queue.FairQueue``)."""

    name: str
    lease_ms: int

    async def refresh(self, grants: list[Grant]) -> list[str]: ...

    async def leave(self, ticket: str, nodes: Iterable[str]) -> None: ...


class _Keeper:
    """Refreshes every lease this event loop holds, once a second, in one call per pool; retries the
    refreshes and give-backs that an outage of Redis made fail, without failing any answer."""

    def __init__(self) -> None:
        self.held: dict[str, tuple[FairQueue, Grant]] = {}
        self.leaving: dict[str, tuple[FairQueue, tuple[str, ...], float]] = {}
        self.task: asyncio.Task | None = None

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
        shortest = min((queue.lease_ms for queue, _grant in self.held.values()), default=None)
        if shortest is None:
            return settings.QUEUE_REFRESH_S
        return min(settings.QUEUE_REFRESH_S, shortest / 3000)

    async def _run(self) -> None:
        pause = self._refresh_pause_s()
        outage_logged = False
        task = asyncio.current_task()
        while self.held or self.leaving:
            await asyncio.sleep(pause)
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
