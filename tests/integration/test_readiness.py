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


@pytest.fixture
def restartable_redis(tmp_path):
    """A Redis of this test alone, the product's while the test runs: the test stops and restarts it (empty)."""
    import redis
    from django.test import override_settings

    from scripts.local_services import redis_server_binary
    from tests.support.server_process import free_port
    from tests.support.stack import Service, wait_until

    port = free_port()
    argv = [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--dir", str(tmp_path)]
    service = Service("redis-restarted", argv, tmp_path)

    def start() -> None:
        service.start()
        wait_until(lambda: redis.Redis(port=port).ping(), 20, "redis", service.process, service.log_path)

    start()
    with override_settings(REDIS_URL=f"redis://127.0.0.1:{port}/0"):
        yield service, start
    service.stop()


def test_a_silent_answer_s_node_has_left_its_pool_only_when_a_settled_redis_says_so(restartable_redis, monkeypatch):
    """What an answer that goes silent asks of its node (monitor.serving.slot): out of the pool when its
    heartbeat no longer names the pool in a Redis that has been up long enough to have heard it; a Redis
    that is away, or restarted empty a moment ago, knows nothing of the node, and the answer goes on."""
    service, start = restartable_redis
    node = f"node-{uuid.uuid4().hex[:6]}"

    def left(settled_s: float) -> bool:
        monkeypatch.setattr(readiness, "REDIS_SETTLED_S", settled_s)
        return run(readiness.left_pool(node, "chat"))

    readiness.publish(node, {"chat": (1, "chat@1")})
    assert not left(0)
    run(readiness.mark_failed(node, "chat"))  # a request saw it fail
    assert left(0)

    service.kill()
    assert not left(0)  # away: says nothing
    start()
    assert not left(3600)  # restarted empty, younger than the time a live node needs to beat again
    assert left(0)  # settled: a node it has no heartbeat for has left
    readiness.publish(node, {"chat": (1, "chat@1")})
    assert not left(0)
