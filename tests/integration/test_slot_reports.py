"""A request that fails on a node reports that node itself, whatever its caller turns the error into: the
API's relay turns a failure into its own error answer inside the slot's block, and the node must still
leave the pool (the one way a failed node is reported is the slot's)."""

from __future__ import annotations

import uuid

import pytest

from monitor.llama.client import LlamaClient
from monitor.models import ServerProfile
from monitor.nodes import readiness
from monitor.public import LlamaError, LlamaUnavailable
from monitor.serving.queue import Grant
from monitor.serving.slot import ServingSlot
from scripts.local_services import free_port
from tests.support.loops import run

pytestmark = pytest.mark.usefixtures("redis_server")


def slot_on_a_dead_node() -> ServingSlot:
    """A slot on a node that serves the pool by its beat, whose server is not there (a closed loopback port)."""
    node = f"node-{uuid.uuid4().hex[:6]}"
    readiness.publish(node, {"chat": (1, "chat@1")}, router=True)
    assert run(readiness.served_on([node], "chat")) == {node: (1, "chat@1")}
    client = LlamaClient(base_url=f"http://127.0.0.1:{free_port()}", api_key="", model="chat@1")
    grant = Grant(ticket=uuid.uuid4().hex, node=node, model="chat@1", owner="someone", priority="person")
    return ServingSlot(ServerProfile(name="chat", hang_limit_s=5), node, client, None, grant)


async def swallowed(request) -> LlamaError:
    """The request's error, caught by the caller as the relay catches it (turned into its own answer)."""
    try:
        await request()
    except LlamaError as error:
        return error
    raise AssertionError("the request did not fail")


@pytest.mark.parametrize("kind", ["post", "stream"])
def test_a_failed_request_takes_its_node_out_even_when_the_caller_handles_the_error(kind):
    slot = slot_on_a_dead_node()

    async def stream() -> None:
        async for _data in slot.stream_raw("/v1/chat/completions", {"messages": []}):
            pass

    async def post() -> None:
        await slot.post_raw("/v1/chat/completions", {"messages": []})

    error = run(swallowed(post if kind == "post" else stream))
    assert isinstance(error, LlamaUnavailable)
    assert run(readiness.served_on([slot.node], "chat")) == {}, "the failed node was left in the pool"
