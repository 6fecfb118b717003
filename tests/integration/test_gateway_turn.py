"""An API call's turn (``chat.api.gateway._turn``) against a real Redis: the key's place, then the
fair queue. The profile is read again after the queue only when the call waited in line, so a
change that went live during the wait is used, and a call that did not wait costs no second read.

The llama-server side is left out on purpose (its slot count and the profile's client are stand-ins
here): what is under test is when the profile is read, which the real server cannot show.
"""

import asyncio
import time
from types import SimpleNamespace

from chat.api import gateway
from chat.api.keys import CallerKey
from chat.api.limits import KeyLimiter
from chat.queue import FairQueue


def run_turn(monkeypatch, *, held_s: float) -> tuple[object, list[str]]:
    """(the call's client once its turn came, the profile reads), with another caller holding the
    only slot for ``held_s`` first (0: nobody)."""
    reads: list[str] = []

    async def current_client(profile):
        reads.append(profile.name)
        return "client of the live revision"

    async def serving_info(client):
        return SimpleNamespace(total_slots=1)

    monkeypatch.setattr(gateway, "current_client", current_client)
    monkeypatch.setattr(gateway, "serving_info", serving_info)
    queue = FairQueue(name=f"turn{time.monotonic_ns()}", capacity=1, poll_s=0.01)
    limiter = KeyLimiter()
    key = CallerKey(id=time.monotonic_ns(), owner_id=1, concurrency_limit=4)
    call = gateway.ApiCall(
        endpoint="chat/completions",
        body={},
        client="client read when the call came",
        stream=True,
        server_profile=SimpleNamespace(name="chat"),
    )

    async def other_caller(holding: asyncio.Event):
        async with queue.slot("someone else"):
            holding.set()
            await asyncio.sleep(held_s)

    async def main():
        holder = None
        if held_s:
            holding = asyncio.Event()
            holder = asyncio.create_task(other_caller(holding))
            await holding.wait()
        async with gateway._turn(call, key, limiter, queue):
            client = call.client
        if holder:
            await holder
        await queue.aclose()
        await limiter.redis.drop_current()
        return client

    return asyncio.run(main()), reads


def test_a_call_that_waited_in_line_takes_up_a_change_that_went_live_meanwhile(redis_server, monkeypatch):
    client, reads = run_turn(monkeypatch, held_s=0.2)
    assert reads == ["chat"]
    assert client == "client of the live revision"


def test_a_call_that_did_not_wait_keeps_the_profile_it_just_read(redis_server, monkeypatch):
    client, reads = run_turn(monkeypatch, held_s=0)
    assert reads == []
    assert client == "client read when the call came"
