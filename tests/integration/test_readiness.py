"""A node's beat in the real Redis: what it serves replaces what it served, less an instance a request found
frozen meanwhile, whose recovery request the beat hands to the node (taken off the list, once)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from monitor.nodes import readiness
from monitor.redis_clients import close_loop_clients

pytestmark = pytest.mark.usefixtures("redis_server")


def beat(node: str, serving: dict, router: bool = True) -> tuple[dict, dict | None]:
    """(the recovery requests the beat took, the node's beat record as the nodes page reads it)."""

    async def run() -> dict:
        try:
            return await readiness.publish_beat(node, serving, router=router)
        finally:
            await close_loop_clients()

    taken = asyncio.run(run())
    return taken, readiness.beats([node])[node]


def test_a_beat_publishes_what_the_node_serves_less_what_was_found_frozen_and_hands_that_on():
    node = f"node-{uuid.uuid4().hex[:6]}"
    serving = {"chat": (2, "chat@3"), "docs": (1, "docs@1")}

    taken, record = beat(node, serving)
    assert taken == {}
    assert record["node"] == node and record["router"] is True
    assert record["serving"] == {"chat": [2, "chat@3"], "docs": [1, "docs@1"]}
    assert asyncio.run(_served(node, "chat")) == {node: (2, "chat@3")}
    assert asyncio.run(_served(node, "docs")) == {node: (1, "docs@1")}

    # A request finds chat@3 frozen: out of its pool at once, and the next beat does not put it back.
    asyncio.run(_request_recovery(node, "chat", "chat@3", "no answer for 20 s"))
    taken, record = beat(node, serving)
    assert taken == {"chat@3": "no answer for 20 s"}
    assert record["serving"] == {"docs": [1, "docs@1"]}
    assert asyncio.run(_served(node, "chat")) == {}

    # Taken once: the node restarted it, and the beat after publishes it again.
    taken, record = beat(node, serving)
    assert taken == {}
    assert record["serving"]["chat"] == [2, "chat@3"]
    assert asyncio.run(_served(node, "chat")) == {node: (2, "chat@3")}

    # A router that does not answer: a beat that serves nothing, and says so.
    taken, record = beat(node, {}, router=False)
    assert record["router"] is False and record["serving"] == {}
    assert asyncio.run(_served(node, "docs")) == {}


async def _request_recovery(node: str, pool: str, model: str, why: str) -> None:
    try:
        await readiness.request_recovery(node, pool, model, why)
    finally:
        await close_loop_clients()


async def _served(node: str, pool: str) -> dict:
    try:
        return await readiness.served_on([node], pool)
    finally:
        await close_loop_clients()
