"""The fair queue against a real Redis server."""

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from chat import queue as fair_queue
from chat.queue import FairQueue
from monitor.models import Event


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
        await _wait_until_in_line(queue, "person", 1)
        waiters.append(asyncio.create_task(wait("C")))
        await _wait_until_in_line(queue, "person", 2)
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
        await _wait_until_in_line(queue, "person", 1)
        assert await queue.waiting_count() == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await queue.waiting_count() == 0
        await queue.release(holder)

    asyncio.run(main())


def test_a_slot_granted_as_the_waiter_is_cancelled_is_given_back(queue_factory):
    """The poll that grants the slot is the one a cancellation lands in (a person pressed Stop
    while queued): the waiter leaves without the slot, and the slot is free at once, not at the
    end of a lease nobody refreshes."""
    queue = queue_factory(capacity=1, poll_s=0.01)
    polled = queue._try_acquire

    async def cancelled_while_granted(*args, **kwargs):
        position = await polled(*args, **kwargs)
        asyncio.current_task().cancel()  # the reply is in; the task was cancelled meanwhile
        return position

    queue._try_acquire = cancelled_while_granted

    async def main():
        with pytest.raises(asyncio.CancelledError):
            await queue.acquire("A")
        assert await queue.active_count() == 0
        assert [grant.user for grant in await queue.grants()] == ["A"]  # it was granted, then given back

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
        await client.rpush(queue._wait_key("ghost", "person"), "ghost-ticket")
        await queue._try_acquire("ghost-ticket", "ghost")
        await queue.release(holder)
        ticket = await asyncio.wait_for(queue.acquire("B"), timeout=5)
        await queue.release(ticket)

    asyncio.run(main())


def test_a_new_waiter_keeps_its_place_before_its_first_poll(queue_factory):
    """A ticket just put in line is not taken for a dead waiter's before it first polls (CI saw a
    summary's chunk lose its place: another process's poll dropped it in that gap)."""
    queue = queue_factory(capacity=1, poll_s=0.01)
    slow = queue_factory(capacity=1, poll_s=0.01)
    slow.prefix = queue.prefix  # a second process in front of the same slots
    first_poll = asyncio.Event()
    polled = slow._try_acquire

    async def late_first_poll(*args, **kwargs):
        await first_poll.wait()  # the gap between joining the line and the first poll
        return await polled(*args, **kwargs)

    slow._try_acquire = late_first_poll

    async def main():
        holder = await queue.acquire("A")
        ahead = asyncio.create_task(queue.acquire("B"))  # B stands in line, polling
        await _wait_until_in_line(queue, "person", 1)
        late = asyncio.create_task(slow.acquire("B"))  # B's second request joins behind it
        await _wait_until_in_line(queue, "person", 2)
        ahead.cancel()  # the late request is now the head of B's line
        with pytest.raises(asyncio.CancelledError):
            await ahead
        other = asyncio.create_task(queue.acquire("C"))  # C's polls look over the line's head

        async def c_polled() -> bool:
            return b"C" in await queue.redis.get().lrange(queue.prefix + "users", 0, -1)

        await _eventually(c_polled, "C never polled")
        first_poll.set()
        await queue.release(holder)
        ticket = await asyncio.wait_for(late, timeout=5)  # it was served first: B was ahead of C
        await queue.release(ticket)
        await queue.release(await asyncio.wait_for(other, timeout=5))

    asyncio.run(main())


def test_a_waiter_dropped_while_stuck_joins_the_line_again(queue_factory):
    """A waiter whose process stopped polling is dropped; if it comes back it is not failed
    (nothing could retry it): it joins again at the end of the line and is served."""
    queue = queue_factory(capacity=1, poll_s=0.01, stale_s=0.2)
    stuck = queue_factory(capacity=1, poll_s=1.0)  # polls once a second: stale for the others
    stuck.prefix = queue.prefix
    served: list[str] = []

    async def wait(line: FairQueue, user: str) -> None:
        ticket = await line.acquire(user)
        served.append(user)
        await line.release(ticket)

    async def main():
        holder = await queue.acquire("A")
        late = asyncio.create_task(wait(stuck, "B"))
        await _wait_until_in_line(queue, "person", 1)
        other = asyncio.create_task(wait(queue, "C"))  # its polls drop B's ticket as a dead waiter's

        async def dropped() -> bool:  # B joins again at its next poll, behind C
            return not await queue.redis.get().llen(queue._wait_key("B", "person"))

        await _eventually(dropped, "B's ticket was never dropped")
        await queue.release(holder)
        await asyncio.wait_for(asyncio.gather(late, other), timeout=10)
        await asyncio.gather(*fair_queue.recording)

    asyncio.run(main())
    assert served == ["C", "B"]
    lost = Event.objects.filter(kind=Event.Kind.QUEUE_OVERFLOW).values_list("message", flat=True)
    assert any(message.startswith("A request lost its place in the queue (position 1)") for message in lost), lost


async def _eventually(check: Callable[[], Awaitable[bool]], failure: str) -> None:
    for _attempt in range(500):
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(failure)


async def _wait_until_in_line(queue: FairQueue, priority: str, count: int) -> None:
    async def in_line() -> bool:
        return await queue.waiting_count(priority) >= count

    await _eventually(in_line, f"{count} {priority} request(s) never stood in line")


def test_a_person_takes_the_next_slot_before_background_work_on_one_slot(queue_factory):
    queue = queue_factory(capacity=1, poll_s=0.01)

    async def served(user: str, priority: str) -> str:
        ticket = await queue.acquire(user, priority=priority)
        await queue.release(ticket)
        return ticket

    async def main():
        running_chunk = await queue.acquire("owner:1", priority="background")
        next_chunk = asyncio.create_task(served("owner:1", "background"))
        await _wait_until_in_line(queue, "background", 1)  # the next chunk was in line first
        person = asyncio.create_task(served("alice", "person"))
        await _wait_until_in_line(queue, "person", 1)
        await asyncio.sleep(0.05)  # several polls of both: the slot is still held, nobody gets it
        assert not next_chunk.done() and not person.done()
        await queue.release(running_chunk)  # the running chunk finishes
        return await person, await next_chunk

    person_ticket, chunk_ticket = asyncio.run(main())
    order = [grant.ticket for grant in asyncio.run(queue.grants())]
    assert order.index(person_ticket) < order.index(chunk_ticket), order


def test_background_keeps_one_slot_free_for_people_where_there_are_several(queue_factory):
    queue = queue_factory(capacity=2, poll_s=0.01)

    async def main():
        first_chunk = await queue.acquire("owner:1", priority="background")
        second_chunk = asyncio.create_task(queue.acquire("owner:1", priority="background"))
        await _wait_until_in_line(queue, "background", 1)
        await asyncio.sleep(0.05)
        assert not second_chunk.done(), "background work took the last slot"
        # The person is served at once, beside the running chunk, though the chunk queued first.
        person = await asyncio.wait_for(queue.acquire("alice"), timeout=5)
        assert await queue.active_count("person") == 1 and await queue.active_count("background") == 1
        await queue.release(person)
        await queue.release(first_chunk)
        await queue.release(await asyncio.wait_for(second_chunk, timeout=5))

    asyncio.run(main())


def test_a_persons_place_in_line_counts_only_people(queue_factory):
    queue = queue_factory(capacity=1, poll_s=0.01)
    positions: list[int] = []

    async def record(position: int) -> None:
        positions.append(position)

    async def chunk(owner: str) -> None:
        await queue.release(await queue.acquire(owner, priority="background"))

    async def main():
        holder = await queue.acquire("bob")
        # Each chunk gives its slot back at once: which owner's turn comes first is the queue's choice.
        chunks = [asyncio.create_task(chunk(f"owner:{n}")) for n in range(3)]
        await _wait_until_in_line(queue, "background", 3)
        person = asyncio.create_task(queue.acquire("alice", record))
        await _wait_until_in_line(queue, "person", 1)
        await asyncio.sleep(0.05)
        await queue.release(holder)
        await queue.release(await asyncio.wait_for(person, timeout=5))
        await asyncio.wait_for(asyncio.gather(*chunks), timeout=5)

    asyncio.run(main())
    assert positions == [1], positions


def test_documents_take_turns_by_owner_not_by_document(queue_factory):
    queue = queue_factory(capacity=1, poll_s=0.01)

    async def chunk(owner: str) -> str:
        ticket = await queue.acquire(owner, priority="background")
        await asyncio.sleep(0.02)
        await queue.release(ticket)
        return owner

    async def main():
        holder = await queue.acquire("bob")
        # Owner A has three chunks in line (two documents), owner B one, queued after A's.
        burst = [asyncio.create_task(chunk("owner:A")) for _ in range(3)]
        await _wait_until_in_line(queue, "background", 3)
        late = asyncio.create_task(chunk("owner:B"))
        await _wait_until_in_line(queue, "background", 4)
        await queue.release(holder)
        await asyncio.gather(*burst, late)

    asyncio.run(main())
    owners = [grant.user for grant in asyncio.run(queue.grants()) if grant.priority == "background"]
    assert owners.index("owner:B") <= 1, owners
