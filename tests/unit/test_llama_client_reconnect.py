"""A kept-alive connection that the server closes as the next request is written: the request goes again.

Fake upstream, named as such: a protocol edge the real llama-server cannot be made to produce
on demand (its router closes idle kept-alive connections on its own clock). This server answers
the first request on a connection, keeps the connection open, and closes it without a word when
the next request arrives on it; a fresh connection gets a proper streamed answer.
"""

import asyncio

import pytest

from monitor.llama import wire
from monitor.llama.client import LlamaClient
from monitor.llama.errors import LlamaUnavailable

STREAM = (
    b'data: {"choices":[{"delta":{"content":"Hello"}}]}\n\n'
    b'data: {"choices":[{"delta":{"content":" there"}}]}\n\n'
    b"data: [DONE]\n\n"
)
ANSWER = b'{"choices":[{"message":{"content":"Hello there"}}]}'


async def read_request(reader: asyncio.StreamReader) -> bool:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")),
        0,
    )
    await reader.readexactly(length)
    return True


class ClosingServer:
    def __init__(self, *, always_close: bool = False, streams: bool = True):
        self.always_close = always_close
        self.streams = streams
        self.connections = 0

    async def handle(self, reader, writer):
        self.connections += 1
        first = True
        try:
            while await read_request(reader):
                if not first or self.always_close and self.connections > 1:
                    break  # the kept-alive connection is closed as the request arrives
                first = False
                body = STREAM if self.streams else ANSWER
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\n"
                    % (b"text/event-stream" if self.streams else b"application/json")
                    + b"Content-Length: %d\r\nConnection: keep-alive\r\n\r\n" % len(body)
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


async def stream_twice(server: ClosingServer) -> list[str]:
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    client = LlamaClient(base_url=f"http://127.0.0.1:{port}", api_key="", timeout=5)
    texts = []
    try:
        for _ in range(2):
            text = ""
            async for batch in client.stream_chat({"messages": [{"role": "user", "content": "hi"}]}):
                text += "".join(choice["delta"].get("content", "") for chunk in batch for choice in chunk["choices"])
            texts.append(text)
    finally:
        await client.aclose()
        listener.close()
    return texts


def test_a_closed_kept_alive_connection_is_opened_again():
    server = ClosingServer()
    assert asyncio.run(stream_twice(server)) == ["Hello there", "Hello there"]
    assert server.connections == 2  # the second answer came over a fresh connection


def test_a_server_that_keeps_closing_is_unavailable_not_a_broken_answer():
    server = ClosingServer(always_close=True)
    with pytest.raises(LlamaUnavailable):
        asyncio.run(stream_twice(server))


def test_a_plain_request_on_a_closed_kept_alive_connection_is_sent_again(monkeypatch):
    # httpx's pool, which keeps connections, is what https:// servers get (an http:// one is asked on a
    # connection of its own: tests/unit/test_wire_fetch.py); here it talks plain HTTP to the fake server.
    monkeypatch.setattr(wire, "supports", lambda base_url: False)

    async def post_twice(server: ClosingServer) -> list[str]:
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        client = LlamaClient(base_url=f"http://127.0.0.1:{port}", api_key="", timeout=5)
        try:
            payload = {"messages": [{"role": "user", "content": "hi"}]}
            return [
                (await client.post_json("/v1/chat/completions", payload))["choices"][0]["message"]["content"]
                for _ in range(2)
            ]
        finally:
            await client.aclose()
            listener.close()

    server = ClosingServer(streams=False)
    assert asyncio.run(post_twice(server)) == ["Hello there", "Hello there"]
    assert server.connections == 2
