"""The fair queue against a real Redis server: turns, places, people first, a pool of nodes, faults.

Nothing here sleeps to order events: a request's arrival is awaited until the queue itself says it
stands in line (its place delivered, or the line's length), and a check that something did not
happen comes after the queue decided (a join is decided atomically, in the queue's script).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable

import pytest
import redis
from django.conf import settings

from monitor.models import Event
from monitor.serving import queue as fair_queue
from monitor.serving.holders import process_holder
from monitor.serving.leases import keeper
from monitor.serving.queue import FairQueue
from tests.support import queue_state, stack


class Pool:
    """A pool's queue with the nodes it is served by, as their heartbeats would say in Redis."""

    def __init__(self, redis_url: str, **queue_options):
        self.name = f"pool{uuid.uuid4().hex[:10]}"
        self.redis = redis.Redis.from_url(redis_url)
        self.queue = FairQueue(self.name, redis_url=redis_url, **queue_options)
        self.nodes: list[str] = []

    def serve(self, node: str, slots: int) -> str:
        """``node`` serves the pool with ``slots`` slots (an hour, unless taken down)."""
        name = f"{self.name}-{node}"
        self.redis.hset(f"qwenweb:node:{name}:ready", self.name, f"{slots} model@{node}")
        self.redis.expire(f"qwenweb:node:{name}:ready", 3600)
        if name not in self.nodes:
            self.nodes.append(name)
        return name

    def down(self, node: str) -> None:
        self.redis.delete(f"qwenweb:node:{node}:ready")

    async def acquire(self, owner: str, **options):
        return await self.queue.acquire(owner, self.nodes, **options)

    async def dispatch(self) -> None:
        await queue_state.dispatch(self.queue, self.nodes)


@pytest.fixture
def pool_factory(redis_server):
    def make(slots: int | None = 1, **queue_options) -> Pool:
        pool = Pool(os.environ["REDIS_URL"], **queue_options)
        if slots:
            pool.serve("a", slots)
        return pool

    return make


async def _eventually(check: Callable[[], Awaitable[bool]], failure: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(failure)


async def _in_line(queue: FairQueue, priority: str | None, count: int) -> None:
    async def check() -> bool:
        return await queue_state.waiting_count(queue, priority) >= count

    await _eventually(check, f"{count} {priority or ''} request(s) never stood in line")


class Places:
    """Records the places a waiter is told, and lets a test await the first one."""

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.told = asyncio.Event()

    async def __call__(self, place: int) -> None:
        self.seen.append(place)
        self.told.set()


def test_capacity_is_never_exceeded_and_owners_take_turns(pool_factory):
    pool = pool_factory(slots=1)
    served: list[str] = []

    async def job(owner: str, name: str) -> None:
        places = Places()
        task = asyncio.create_task(pool.acquire(owner, on_position=places))
        await places.told.wait()  # it stands in line: the next one arrives after it
        jobs.append((name, task))

    jobs: list[tuple[str, asyncio.Task]] = []

    async def main():
        head = await pool.acquire("A")
        for index in range(1, 5):  # A queues a burst of four, then B one request
            await job("A", f"a{index}")
        await job("B", "b1")
        grant = head
        # Waiters not served yet. Not "the tasks not done": the next waiter may already be done by the
        # time a release returns (its wake-up comes with the release), and must still be counted.
        unserved = {task: name for name, task in jobs}
        while unserved:
            assert await queue_state.active_count(pool.queue) == 1
            await pool.queue.release(grant)
            done, _ = await asyncio.wait(unserved, return_when=asyncio.FIRST_COMPLETED)
            assert len(done) == 1  # one slot: one grant at a time
            (task,) = done
            served.append(unserved.pop(task))
            grant = task.result()
        await pool.queue.release(grant)

    asyncio.run(main())
    # B's single request is served in the first round after A's head, not after A's whole burst.
    assert served.index("b1") <= 1, served
    assert sorted(served) == ["a1", "a2", "a3", "a4", "b1"]


def test_a_released_slot_wakes_its_waiter_without_polling(pool_factory):
    """The grant itself wakes the waiter: it never looks again on its own (it would only after an hour
    here, or when a wait on its wake list ends without news)."""
    pool = pool_factory(slots=1, poll_s=3600)
    looked_again = []
    real_poll = pool.queue._poll

    async def counted_poll(*args):
        looked_again.append(args)
        return await real_poll(*args)

    pool.queue._poll = counted_poll

    async def main():
        holder = await pool.acquire("A")
        places = Places()
        waiter = asyncio.create_task(pool.acquire("B", on_position=places))
        await places.told.wait()
        looked_again.clear()  # A's own, if it came within a fresh Redis's grace (QUEUE_GRACE_S)
        await pool.queue.release(holder)
        await pool.queue.release(await asyncio.wait_for(waiter, timeout=30))

    asyncio.run(main())
    assert looked_again == []


def test_waiters_are_told_their_place_and_it_moves_up(pool_factory):
    pool = pool_factory(slots=1)
    b_places, c_places = Places(), Places()

    async def main():
        holder = await pool.acquire("A")
        b = asyncio.create_task(pool.acquire("B", on_position=b_places))
        await b_places.told.wait()
        c = asyncio.create_task(pool.acquire("C", on_position=c_places))
        await c_places.told.wait()
        await pool.queue.release(holder)
        b_grant = await asyncio.wait_for(b, timeout=5)
        await _eventually(lambda: _true(c_places.seen == [2, 1]), f"C was told {c_places.seen}")
        await pool.queue.release(b_grant)
        await pool.queue.release(await asyncio.wait_for(c, timeout=5))

    asyncio.run(main())
    assert b_places.seen == [1]
    assert c_places.seen == [2, 1]


async def _handed_on(pool: Pool, holder, waiter: asyncio.Task, timeout_s: float = 5):
    """The holder gives its slot back; the waiter's grant (given back in turn)."""
    await pool.queue.release(holder)
    grant = await asyncio.wait_for(waiter, timeout=timeout_s)
    await pool.queue.release(grant)
    return grant


async def _true(value: bool) -> bool:
    return value


def test_a_cancelled_waiter_leaves_the_line(pool_factory):
    pool = pool_factory(slots=1)

    async def main():
        holder = await pool.acquire("A")
        places = Places()
        waiter = asyncio.create_task(pool.acquire("B", on_position=places))
        await places.told.wait()
        assert await queue_state.waiting_count(pool.queue) == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await queue_state.waiting_count(pool.queue) == 0
        await pool.queue.release(holder)
        assert await queue_state.active_count(pool.queue) == 0

    asyncio.run(main())


def test_a_slot_granted_as_the_waiter_is_cancelled_is_given_back(pool_factory):
    """The grant reaches a waiter whose task was cancelled meanwhile (a person pressed Stop while
    queued): it leaves without the slot, and the slot is free at once, not after a lease."""
    pool = pool_factory(slots=1)
    real_wait = pool.queue._wait

    async def cancelled_as_granted(*args, **kwargs):
        news = await real_wait(*args, **kwargs)
        if news and news.startswith("g "):
            asyncio.current_task().cancel()  # the grant is in; the task was cancelled meanwhile
        return news

    pool.queue._wait = cancelled_as_granted

    async def main():
        holder = await pool.acquire("A")
        places = Places()
        waiter = asyncio.create_task(pool.acquire("B", on_position=places))
        await places.told.wait()
        await pool.queue.release(holder)
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await queue_state.active_count(pool.queue) == 0
        assert [grant.user for grant in await queue_state.grants(pool.queue)] == ["A", "B"]  # granted, then given back

    asyncio.run(main())


def test_the_slot_of_a_frozen_holder_comes_back_after_its_lease(pool_factory):
    """A holder that stops refreshing (a frozen process) keeps its slot until its lease ends by Redis's
    clock, and no longer: the next one in line (looking again every 0.1 s) is granted it then."""
    pool = pool_factory(slots=1, lease_s=1.0, poll_s=0.1)

    async def main():
        frozen = await pool.acquire("frozen")
        keeper().drop(frozen.ticket)  # it stops refreshing, as a stopped process does
        lease_end_ms = await _lease_end_ms(pool, frozen)
        grant = await asyncio.wait_for(pool.acquire("B"), timeout=30)
        await pool.queue.release(grant)
        granted_at_ms = (await queue_state.grants(pool.queue, 1))[-1].at_ms
        return lease_end_ms, granted_at_ms

    lease_end_ms, granted_at_ms = asyncio.run(main())
    assert granted_at_ms >= lease_end_ms, "the slot was given again while its lease ran"


def test_a_held_lease_is_refreshed_for_as_long_as_it_is_held(pool_factory):
    """Two leases on (by Redis's clock) the slot is still the holder's: the queue, asked to hand out
    what it can, gives the waiter nothing."""
    pool = pool_factory(slots=1, lease_s=1.0)

    async def main():
        holder = await pool.acquire("A")
        first_end_ms = await _lease_end_ms(pool, holder)
        places = Places()
        waiter = asyncio.create_task(pool.acquire("B", on_position=places))
        await places.told.wait()

        async def two_leases_on() -> bool:
            seconds, microseconds = pool.redis.time()
            return seconds * 1000 + microseconds // 1000 > first_end_ms + pool.queue.lease_ms

        await _eventually(two_leases_on, "Redis's clock never passed the second lease's end")
        await pool.dispatch()  # the queue decides now: an expired lease would go to B
        assert await queue_state.active_count(pool.queue) == 1 and await queue_state.waiting_count(pool.queue) == 1
        assert [grant.user for grant in await queue_state.grants(pool.queue)] == ["A"]
        assert not waiter.done()
        await pool.queue.release(holder)
        await pool.queue.release(await asyncio.wait_for(waiter, timeout=30))

    asyncio.run(main())


async def _lease_end_ms(pool: Pool, grant) -> int:
    """When ``grant``'s lease ends, by Redis's clock, as the queue holds it now."""
    return int(await pool.queue.redis.get().zscore(pool.queue.prefix + "active", grant.ticket))


def test_a_waiter_no_longer_heard_is_dropped_and_joins_again_if_it_comes_back(pool_factory):
    """A waiter whose process stopped (it does not look again for longer than the stale limit) is
    dropped from the line; when it comes back it is not failed: it joins again at the end, and the
    timeline says it lost its place."""
    pool = pool_factory(slots=1, stale_s=0.5, poll_s=0.1)
    stuck = FairQueue(pool.name, redis_url=os.environ["REDIS_URL"], stale_s=0.5, poll_s=3.0)
    served: list[str] = []

    async def wait(queue: FairQueue, owner: str, places: Places) -> None:
        grant = await queue.acquire(owner, pool.nodes, on_position=places)
        served.append(owner)
        await queue.release(grant)

    async def main():
        holder = await pool.acquire("A")
        b_places, c_places = Places(), Places()
        late = asyncio.create_task(wait(stuck, "B", b_places))  # looks again only every 3 s
        await b_places.told.wait()
        other = asyncio.create_task(wait(pool.queue, "C", c_places))  # its looks drop B as stale
        await c_places.told.wait()

        async def dropped() -> bool:
            return await queue_state.waiting_count(pool.queue) == 1 and c_places.seen[-1] == 1

        await _eventually(dropped, "B was never dropped")
        await pool.queue.release(holder)
        await asyncio.wait_for(asyncio.gather(late, other), timeout=15)
        await asyncio.gather(*fair_queue.recording)

    asyncio.run(main())
    assert served == ["C", "B"]
    lost = Event.objects.filter(kind=Event.Kind.QUEUE_OVERFLOW).values_list("message", flat=True)
    assert any(message.startswith("A request lost its place in the queue (position 1)") for message in lost), lost


def test_a_person_takes_the_next_slot_before_background_work_on_one_slot(pool_factory):
    pool = pool_factory(slots=1)

    async def main():
        running_chunk = await pool.acquire("owner:1", priority="background")
        next_chunk = asyncio.create_task(pool.acquire("owner:1", priority="background"))
        await _in_line(pool.queue, "background", 1)  # the next chunk was in line first
        places = Places()
        person = asyncio.create_task(pool.acquire("alice", on_position=places))
        await places.told.wait()
        assert not next_chunk.done() and not person.done()
        await pool.queue.release(running_chunk)  # the running chunk finishes
        person_grant = await asyncio.wait_for(person, timeout=5)
        assert not next_chunk.done()  # one slot, a person holds it
        await pool.queue.release(person_grant)
        await pool.queue.release(await asyncio.wait_for(next_chunk, timeout=5))
        return person_grant.ticket

    person_ticket = asyncio.run(main())
    order = [grant.priority for grant in asyncio.run(queue_state.grants(pool.queue))]
    assert order == ["background", "person", "background"], order
    assert asyncio.run(queue_state.grants(pool.queue))[1].ticket == person_ticket


def test_background_keeps_one_slot_free_for_people_where_there_are_several(pool_factory):
    pool = pool_factory(slots=2)

    async def main():
        first_chunk = await pool.acquire("owner:1", priority="background")
        second_chunk = asyncio.create_task(pool.acquire("owner:1", priority="background"))
        await _in_line(pool.queue, "background", 1)
        assert not second_chunk.done(), "background work took the last slot"
        # The person is served at once, beside the running chunk, though the chunk queued first.
        person = await asyncio.wait_for(pool.acquire("alice"), timeout=5)
        assert (
            await queue_state.active_count(pool.queue, "person") == 1
            and await queue_state.active_count(pool.queue, "background") == 1
        )
        await pool.queue.release(person)
        await pool.queue.release(first_chunk)
        await pool.queue.release(await asyncio.wait_for(second_chunk, timeout=5))

    asyncio.run(main())


def test_a_persons_place_in_line_counts_only_people(pool_factory):
    pool = pool_factory(slots=1)
    places = Places()

    async def chunk(owner: str) -> None:
        await pool.queue.release(await pool.acquire(owner, priority="background"))

    async def main():
        holder = await pool.acquire("bob")
        chunks = [asyncio.create_task(chunk(f"owner:{n}")) for n in range(3)]
        await _in_line(pool.queue, "background", 3)
        person = asyncio.create_task(pool.acquire("alice", on_position=places))
        await places.told.wait()
        await pool.queue.release(holder)
        await pool.queue.release(await asyncio.wait_for(person, timeout=5))
        await asyncio.wait_for(asyncio.gather(*chunks), timeout=5)

    asyncio.run(main())
    assert places.seen == [1], places.seen


def test_documents_take_turns_by_owner_not_by_document(pool_factory):
    pool = pool_factory(slots=1)

    async def chunk(owner: str) -> None:
        await pool.queue.release(await pool.acquire(owner, priority="background"))

    async def main():
        holder = await pool.acquire("bob")
        # Owner A has three chunks in line (two documents), owner B one, queued after A's.
        burst = [asyncio.create_task(chunk("owner:A")) for _ in range(3)]
        await _in_line(pool.queue, "background", 3)
        late = asyncio.create_task(chunk("owner:B"))
        await _in_line(pool.queue, "background", 4)
        await pool.queue.release(holder)
        await asyncio.wait_for(asyncio.gather(*burst, late), timeout=10)

    asyncio.run(main())
    owners = [grant.user for grant in asyncio.run(queue_state.grants(pool.queue)) if grant.priority == "background"]
    assert owners.index("owner:B") <= 1, owners


# ---------------------------------------------------------------------- a pool of nodes


def test_a_pools_slots_are_the_sum_of_its_nodes_and_requests_spread_over_them(pool_factory):
    pool = pool_factory(slots=None)
    first, second = pool.serve("a", 2), pool.serve("b", 2)

    async def main():
        grants = [await asyncio.wait_for(pool.acquire(f"p{index}"), timeout=5) for index in range(4)]
        places = Places()
        fifth = asyncio.create_task(pool.acquire("p4", on_position=places))
        await places.told.wait()  # four slots in all: the fifth waits
        nodes = sorted(grant.node for grant in grants)
        models = {grant.node: grant.model for grant in grants}
        for grant in grants:
            await pool.queue.release(grant)
        await pool.queue.release(await asyncio.wait_for(fifth, timeout=5))
        return nodes, models

    nodes, models = asyncio.run(main())
    assert nodes == sorted([first, first, second, second])
    assert models == {first: "model@a", second: "model@b"}  # the revision each node serves


def test_a_node_that_stops_serving_gets_no_more_slots(pool_factory):
    pool = pool_factory(slots=None)
    first, second = pool.serve("a", 1), pool.serve("b", 1)

    async def main():
        pool.down(first)  # its heartbeat stopped, or a request found it failing
        grants = [await asyncio.wait_for(pool.acquire("p0"), timeout=5)]
        places = Places()
        waiter = asyncio.create_task(pool.acquire("p1", on_position=places))
        await places.told.wait()  # the second node's one slot is taken: nothing on the first
        pool.serve("a", 1)  # it serves again (its heartbeat): the waiter gets it
        await pool.dispatch()
        grants.append(await asyncio.wait_for(waiter, timeout=5))
        for grant in grants:
            await pool.queue.release(grant)
        return [grant.node for grant in grants]

    assert asyncio.run(main()) == [second, first]


def test_a_follow_up_waits_for_its_node_while_that_costs_less_than_recomputing_elsewhere(pool_factory):
    pool = pool_factory(slots=None)
    first, _second = pool.serve("a", 1), pool.serve("b", 1)

    async def main():
        busy = await pool.acquire("other", affinity=first)  # someone holds the first node
        assert busy.node == first
        follow_up = asyncio.create_task(pool.acquire("alice", affinity=first, patience_s=30))
        await _in_line(pool.queue, "person", 1)
        assert not follow_up.done(), "it took the other node though its own frees up sooner than a recompute"
        return (await _handed_on(pool, busy, follow_up)).node

    assert asyncio.run(main()) == first


def test_a_follow_up_takes_another_node_once_its_patience_runs_out(pool_factory):
    """It waits for its busy node for its patience (by Redis's clock: from the busy node's grant to its
    own is at least that), then takes the free one."""
    pool = pool_factory(slots=None)
    first, second = pool.serve("a", 1), pool.serve("b", 1)

    async def main():
        busy = await pool.acquire("other", affinity=first)
        grant = await asyncio.wait_for(pool.acquire("alice", affinity=first, patience_s=0.5), timeout=30)
        await pool.queue.release(grant)
        await pool.queue.release(busy)
        return grant.node, [record.at_ms for record in await queue_state.grants(pool.queue)]

    node, (busy_at_ms, granted_at_ms) = asyncio.run(main())
    assert node == second and granted_at_ms - busy_at_ms >= 500


def test_a_follow_up_whose_node_is_down_goes_elsewhere_at_once(pool_factory):
    pool = pool_factory(slots=None)
    first, second = pool.serve("a", 1), pool.serve("b", 1)
    pool.down(first)

    async def main():
        grant = await asyncio.wait_for(pool.acquire("alice", affinity=first, patience_s=60), timeout=5)
        await pool.queue.release(grant)
        return grant.node

    assert asyncio.run(main()) == second


# ---------------------------------------------------------------------- faults


def test_a_gone_process_slots_are_freed_by_its_successor_at_once(pool_factory, run_dir):
    """A process of the same kind on this host held a slot and was killed (SIGKILL): its successor
    frees it at start-up, long before its lease (an hour here) would run out."""
    pool = pool_factory(slots=1, lease_s=3600)
    holder = subprocess.Popen(
        [sys.executable, "-m", "tests.support.slot_holder", pool.name, *pool.nodes],
        cwd=stack.ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "QWENWEB_PROCESS_KIND": "test-web"},
    )
    try:
        assert holder.stdout.readline().strip() == b"held"
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
    assert asyncio.run(queue_state.active_count(pool.queue)) == 1  # still held: nobody refreshes it, its lease is long
    previous = os.environ.get("QWENWEB_PROCESS_KIND")
    try:
        assert fair_queue.free_slots_of_gone_predecessors("test-web") == 1
    finally:
        os.environ["QWENWEB_PROCESS_KIND"] = previous or "process"
        process_holder.cache_clear()
    assert asyncio.run(queue_state.active_count(pool.queue)) == 0


@pytest.fixture
def own_redis(run_dir):
    """A Redis of this test's own, to kill and start again."""
    port = stack.free_port()
    service = stack.Service(
        f"redis-{port}",
        [stack.redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port), "--save", ""],
        run_dir,
    )
    url = f"redis://127.0.0.1:{port}/0"

    def start() -> None:
        service.start()
        stack.wait_until(lambda: redis.Redis.from_url(url).ping(), 20, "redis", service.process, service.log_path)

    start()
    service.restart = start
    service.url = url
    yield service
    service.stop()


def test_leases_survive_a_redis_restart_and_nothing_is_granted_twice(own_redis, monkeypatch):
    """Redis is killed while a slot is held and a request waits: the holder's answer goes on (its
    refreshes fail quietly, then put the lease back), the waiter waits, and when Redis is back the
    one slot is still the holder's: the waiter gets it only when the holder gives it back. The keeper's
    clock is longer than the test: only its watch of Redis's connection can put the lease back in time."""
    monkeypatch.setattr(settings, "QUEUE_REFRESH_S", 30.0)
    pool = Pool(own_redis.url, lease_s=90)
    node = pool.serve("a", 1)

    async def main():
        holder = await pool.acquire("A")
        places = Places()
        waiter = asyncio.create_task(pool.acquire("B", on_position=places))
        await places.told.wait()
        own_redis.kill()
        await asyncio.sleep(1.5)  # Redis is away; the holder's keeper keeps trying
        own_redis.restart()  # empty: it lost every key
        pool.serve("a", 1)  # the node's heartbeat says again what it serves

        async def grace_over_and_waiter_back_in_line() -> bool:
            uptime_s = pool.redis.info("server")["uptime_in_seconds"]
            return uptime_s >= settings.QUEUE_GRACE_S and await queue_state.waiting_count(pool.queue) == 1

        await _eventually(grace_over_and_waiter_back_in_line, "the waiter never stood in line again", 30)
        await pool.dispatch()  # the queue decides now: a lease not put back would go to the waiter
        assert await queue_state.grants(pool.queue) == [], "the slot was given twice"  # none since the restart
        assert not waiter.done()
        assert await queue_state.active_count(pool.queue, node=node) == 1  # the holder's, put back
        return (await _handed_on(pool, holder, waiter, 10)).node

    assert asyncio.run(main()) == node


def test_a_request_that_arrives_while_redis_is_down_waits_for_it(own_redis):
    pool = Pool(own_redis.url)
    pool.serve("a", 1)
    own_redis.kill()

    async def main():
        request = asyncio.create_task(pool.acquire("A"))
        await asyncio.sleep(1.0)
        assert not request.done()
        own_redis.restart()
        pool.serve("a", 1)
        grant = await asyncio.wait_for(request, timeout=15)
        await pool.queue.release(grant)

    asyncio.run(main())


def test_the_keepers_watch_of_redis_is_one_idle_connection_while_leases_are_held(own_redis):
    """The keeper's watch is one connection blocked on its list while this loop holds leases (two grants,
    still one, the same past redis-py's 5 s read timeout: never reopened), and it is closed once they are
    given back: nothing is left open on Redis."""
    pool = Pool(own_redis.url, lease_s=6)  # the keeper wakes every 2 s: it sees the grants go soon
    pool.serve("a", 2)

    async def watches() -> list[str]:
        clients = await pool.queue.redis.get().client_list()
        return [client["id"] for client in clients if client["cmd"] == "blpop" and client["flags"] == "b"]

    async def watching(count: int) -> bool:
        return len(await watches()) == count

    async def main():
        first = await pool.acquire("A")
        second = await pool.acquire("B")
        await _eventually(lambda: watching(1), "no connection watches Redis while leases are held")
        watch = await watches()
        await asyncio.sleep(6)  # three refreshes of the keeper's clock, past redis-py's read timeout
        assert await watches() == watch, "the watch was not the same connection all along"
        await pool.queue.release(first)
        await pool.queue.release(second)
        await _eventually(lambda: watching(0), "the watch stayed open after the leases were given back")

    asyncio.run(main())
