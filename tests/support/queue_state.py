"""The fair queue's state read straight from Redis, for tests and benches: slots held, people in line,
the grant log. The product never reads the queue this way (it asks the queue's script)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from monitor.serving.queue import GRANT_LOG_LENGTH, PRIORITIES, FairQueue, Priority


@dataclass(frozen=True)
class GrantRecord:
    """One slot handed out, as the queue logged it."""

    at_ms: int
    priority: str
    ticket: str
    user: str
    node: str


async def _now_ms(queue: FairQueue) -> int:
    seconds, microseconds = await queue.redis.get().time()
    return seconds * 1000 + microseconds // 1000


async def active_count(queue: FairQueue, priority: Priority | None = None, node: str | None = None) -> int:
    """Slots held now (by one class, or on one node, when given)."""
    now = await _now_ms(queue)
    client = queue.redis.get()
    if node is not None:
        return int(await client.zcount(queue.prefix + "node:" + node, now, "+inf"))
    total = int(await client.zcount(queue.prefix + "active", now, "+inf"))
    if priority is None:
        return total
    background = int(await client.zcount(queue.prefix + "bg:active", now, "+inf"))
    return background if priority == "background" else total - background


async def waiting_count(queue: FairQueue, priority: Priority | None = None) -> int:
    """Requests in line (of one class only when ``priority`` is given)."""
    client = queue.redis.get()
    total = 0
    for klass in (priority,) if priority else PRIORITIES:
        users, wait = ("bg:users", "bg:wait:") if klass == "background" else ("users", "wait:")
        for user in await client.lrange(queue.prefix + users, 0, -1):
            total += await client.llen(queue.prefix + wait + user.decode())
    return total


async def grants(queue: FairQueue, limit: int = GRANT_LOG_LENGTH) -> list[GrantRecord]:
    """The last slots handed out, oldest first."""
    entries = await queue.redis.get().lrange(queue.prefix + "grants", 0, limit - 1)
    records = []
    for entry in reversed(entries):
        at_ms, priority, ticket, user, node = entry.decode().split(" ", 4)
        records.append(GrantRecord(int(at_ms), priority, ticket, user, node))
    return records


async def dispatch(queue: FairQueue, nodes: Iterable[str]) -> None:
    """Have the queue's script hand out what can be handed out now (as a slot's release does)."""
    await queue._run("dispatch", nodes)
