"""The fair queue against a real Redis server."""

import asyncio
import time

import pytest

from chat.queue import FairQueue


@pytest.fixture
def queue_factory(redis_server):
    created = []

    def make(**kwargs):
        queue = FairQueue(name=f"t{time.monotonic_ns()}", **kwargs)
        created.append(queue)
        return queue

    return make


def test_capacity_is_never_exceeded_and_users_take_turns(queue_factory):
    queue = queue_factory(capacity=1, poll_s=0.01)
    served: list[str] = []

    async def job(user: str, name: str, delay: float, holding: asyncio.Event | None = None):
        if holding is not None:
            await holding.wait()
        await asyncio.sleep(delay)
        async with queue.slot(user):
            assert await queue.active_count() == 1
            served.append(name)
            await asyncio.sleep(0.05)

    async def head(holding: asyncio.Event):
        async with queue.slot("A"):
            served.append("a0")
            holding.set()
            await asyncio.sleep(0.2)

    async def main():
        # A holds the slot; then A queues a burst of 4 and B one request, a little later.
        holding = asyncio.Event()
        await asyncio.gather(
            head(holding),
            *(job("A", f"a{i}", 0.01 * i, holding) for i in range(1, 5)),
            job("B", "b1", 0.03, holding),
        )

    asyncio.run(main())
    assert served[0] == "a0"
    # B's single request is served within the first round after A's head, not after A's whole burst.
    assert served.index("b1") <= 2, served


def test_waiters_are_told_their_place(queue_factory):
    queue = queue_factory(capacity=1, poll_s=0.01)
    positions: dict[str, list[int]] = {"B": [], "C": []}

    async def main():
        holder = await queue.acquire("A")

        async def wait(user):
            async def record(position):
                positions[user].append(position)

            ticket = await queue.acquire(user, record)
            await queue.release(ticket)

        waiters = [asyncio.create_task(wait("B"))]
        await asyncio.sleep(0.05)
        waiters.append(asyncio.create_task(wait("C")))
        await asyncio.sleep(0.1)
        await queue.release(holder)
        await asyncio.gather(*waiters)

    asyncio.run(main())
    assert positions["B"][0] == 1
    assert positions["C"][0] == 2


def test_cancelled_waiter_leaves_the_line(queue_factory):
    queue = queue_factory(capacity=1, poll_s=0.01)

    async def main():
        holder = await queue.acquire("A")
        waiter = asyncio.create_task(queue.acquire("B"))
        await asyncio.sleep(0.05)
        assert await queue.waiting_count() == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await queue.waiting_count() == 0
        await queue.release(holder)

    asyncio.run(main())


def test_slot_of_a_dead_holder_comes_back_after_its_lease(queue_factory):
    queue = queue_factory(capacity=1, poll_s=0.01, lease_s=0.3)

    async def main():
        await queue.acquire("crashed")  # never released, never refreshed
        started = time.monotonic()
        ticket = await asyncio.wait_for(queue.acquire("B"), timeout=5)
        await queue.release(ticket)
        return time.monotonic() - started

    waited = asyncio.run(main())
    assert 0.2 < waited < 3


def test_waiter_that_stops_polling_is_dropped(queue_factory):
    queue = queue_factory(capacity=1, poll_s=0.01, stale_s=0.2)

    async def main():
        holder = await queue.acquire("A")
        # A waiter whose process died: its ticket is in line but nobody polls for it.
        client = queue.redis.get()
        await client.rpush(queue._wait_key("ghost"), "ghost-ticket")
        await queue._try_acquire("ghost-ticket", "ghost")
        await queue.release(holder)
        ticket = await asyncio.wait_for(queue.acquire("B"), timeout=5)
        await queue.release(ticket)

    asyncio.run(main())
