"""LlamaClient's plain requests go over ``wire.fetch``: one request per connection, no pool (the
retry policy: tests/unit/test_llama_retry.py).

Fake upstream, named as such: a few lines of asyncio that answer the way llama-server does
(Content-Length JSON, Prometheus text, an error status) and record what was asked, so the
request line, the headers and the retry can be seen. The real server answers these requests in
every integration test (the router's status, the sampler's metrics, the watchdog).
"""

from __future__ import annotations

import asyncio

import pytest

from monitor.llama.client import LlamaClient
from monitor.llama.errors import LlamaRejected, LlamaUnavailable


async def answering(status: int, body: bytes, seen: list[bytes]):
    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
        )
        seen.append(head + await reader.readexactly(length))
        reason = b"OK" if status < 400 else b"Bad Request"
        writer.write(b"HTTP/1.1 %d %s\r\nContent-Length: %d\r\n\r\n%s" % (status, reason, len(body), body))
        await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def ask(status: int, body: bytes, work, *, handler=None, timeout: float = 5) -> tuple[object, list[bytes]]:
    async def main():
        seen: list[bytes] = []
        server = await (
            answering(status, body, seen) if handler is None else asyncio.start_server(handler, "127.0.0.1", 0)
        )
        port = server.sockets[0].getsockname()[1]
        client = LlamaClient(base_url=f"http://127.0.0.1:{port}", api_key="secret", timeout=timeout, model="chat@1")
        try:
            return await work(client), seen
        finally:
            server.close()

    return asyncio.run(main())


def test_a_get_names_its_model_and_key_and_sends_no_body():
    listing = b'{"data":[{"id":"chat@1","status":{"value":"loaded"}}]}'
    models, seen = ask(200, listing, lambda client: client.list_models(reload=True))
    assert models == [{"id": "chat@1", "status": {"value": "loaded"}}]
    head = seen[0].decode()
    assert head.startswith("GET /models?reload=1&model=chat%401 HTTP/1.1\r\n")
    assert "Authorization: Bearer secret\r\n" in head
    assert "Connection: close\r\n" in head
    assert "Content-Length" not in head and "Content-Type" not in head


def test_a_post_carries_its_json_with_the_model_and_the_body_comes_back_untouched():
    answer = b'{"choices":[{"message":{"content":"Hi"}}],"timings":{"prompt_n":3}}'
    body, seen = ask(200, answer, lambda client: client.post_raw("/v1/chat/completions", {"messages": []}))
    assert body == answer
    head, _, sent = seen[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"Content-Type: application/json\r\n" in head
    assert sent == b'{"messages":[],"model":"chat@1"}'


def test_text_and_an_error_status():
    text, _seen = ask(200, "llamacpp:requests_processing 0\n# caf\u00e9\n".encode(), lambda c: c.get_text("/metrics"))
    assert text == "llamacpp:requests_processing 0\n# caf\u00e9\n"
    refusal = b'{"error":{"code":400,"message":"the request exceeds the available context size","type":"invalid_request_error"}}'
    with pytest.raises(LlamaRejected) as caught:
        ask(400, refusal, lambda client: client.get_json("/slots"))
    assert str(caught.value) == "the request exceeds the available context size"
    assert caught.value.status == 400


def test_a_plain_request_gives_up_at_its_own_time_limit():
    """``timeout_s`` bounds the whole request (a caller asks /slots for 2-3 s), not each wait for bytes:
    an answer that trickles on for good, a byte at a time (no wait for bytes ever reaching the
    client's read timeout), is given up. Without that bound the request would never end."""

    async def trickle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n")
        try:
            while True:
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.1)
        except ConnectionError:
            writer.close()

    async def slots_bounded(client):
        async with asyncio.timeout(60):  # the test's guard: far past the request's own half second
            await client.get_json("/slots", timeout_s=0.5)

    with pytest.raises(LlamaUnavailable):
        ask(200, b"", slots_bounded, handler=trickle, timeout=3600)


@pytest.mark.parametrize("stall", [False, True])
def test_an_answer_cut_or_stalled_before_its_end_is_unavailable(stall):
    async def cut(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"data":')
        await writer.drain()
        if stall:
            await asyncio.sleep(2)
        writer.close()

    with pytest.raises(LlamaUnavailable):
        ask(200, b"", lambda client: client.list_models(), handler=cut, timeout=0.3)


def test_a_routers_proxy_error_is_the_instance_gone_not_its_message():
    """The router answers 500 "proxy error: ..." when the instance it proxies to is gone (killed): the
    person is told the model server is not reachable, and the slot takes only that instance out."""
    from monitor.llama.errors import LlamaInstanceGone, LlamaRejected, LlamaUnavailable, rejection_from

    gone = rejection_from(500, b'{"error": {"message": "proxy error: Could not establish connection"}}')
    assert isinstance(gone, LlamaInstanceGone) and isinstance(gone, LlamaUnavailable)
    assert str(gone) == "The model server is not reachable right now."
    assert isinstance(rejection_from(400, b'{"error": {"message": "model is not loaded"}}'), LlamaInstanceGone)
    assert isinstance(rejection_from(400, b'{"error": {"message": "context too long"}}'), LlamaRejected)
