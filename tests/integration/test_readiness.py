"""A node's beat in the real Redis: what it serves replaces what it served, less an instance a request found
frozen meanwhile, whose recovery request the beat hands to the node (taken off the list, once)."""

from __future__ import annotations

import uuid

import pytest

from monitor.nodes import readiness
from tests.support.loops import run

pytestmark = pytest.mark.usefixtures("redis_server")


def beat(node: str, serving: dict, router: bool = True) -> tuple[dict, dict | None]:
    """(the recovery requests the beat took, the node's beat record as the nodes page reads it)."""
    taken = readiness.publish(node, serving, router=router)
    return taken, readiness.beats([node])[node]


def test_a_beat_publishes_what_the_node_serves_less_what_was_found_frozen_and_hands_that_on():
    node = f"node-{uuid.uuid4().hex[:6]}"
    serving = {"chat": (2, "chat@3"), "docs": (1, "docs@1")}

    taken, record = beat(node, serving)
    assert taken == {}
    assert record["node"] == node and record["router"] is True
    assert record["serving"] == {"chat": [2, "chat@3"], "docs": [1, "docs@1"]}
    assert run(readiness.served_on([node], "chat")) == {node: (2, "chat@3")}
    assert run(readiness.served_on([node], "docs")) == {node: (1, "docs@1")}

    # A request finds chat@3 frozen: out of its pool at once, and the next beat does not put it back.
    run(readiness.request_recovery(node, "chat", "chat@3", "no answer for 20 s"))
    taken, record = beat(node, serving)
    assert taken == {"chat@3": "no answer for 20 s"}
    assert record["serving"] == {"docs": [1, "docs@1"]}
    assert run(readiness.served_on([node], "chat")) == {}

    # Taken once: the node restarted it, and the beat after publishes it again.
    taken, record = beat(node, serving)
    assert taken == {}
    assert record["serving"]["chat"] == [2, "chat@3"]
    assert run(readiness.served_on([node], "chat")) == {node: (2, "chat@3")}

    # A router that does not answer: a beat that serves nothing, and says so.
    taken, record = beat(node, {}, router=False)
    assert record["router"] is False and record["serving"] == {}
    assert run(readiness.served_on([node], "docs")) == {}
