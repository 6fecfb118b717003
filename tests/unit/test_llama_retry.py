"""The one retry policy (``wire.send_once_more_if_nothing_ran``), for plain requests and streams alike:
a request whose connection was refused, or reset or closed before any byte of its answer, is sent
once more after a short pause; a timeout or an answer that began is never sent again.

Fake upstream, named as such: a reset or a close before the answer is a protocol edge the real
llama-server cannot be made to produce on demand (its router drops connections on its own clock).
This server answers each connection the way its test says, and counts the connections.
"""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from monitor.llama.client import LlamaClient
from monitor.llama.errors import LlamaStreamBroken, LlamaUnavailable
from scripts.local_services import free_port

STREAM = (
    b'data: {"choices":[{"delta":{"content":"Hello"}}]}\n\n'
    b'data: {"choices":[{"delta":{"content":" there"}}]}\n\n'
    b"data: [DONE]\n\n"
)
ANSWER = b'{"choices":[{"message":{"content":"Hello there"}}]}'


async def read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")),
        0,
    )
    await reader.readexactly(length)


def answer(writer: asyncio.StreamWriter, body: bytes) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


def reset(writer: asyncio.StreamWriter) -> None:
    """Closed with a RST (SO_LINGER 0), as a killed process's socket is."""
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class Upstream:
    """Connection ``n`` (from 1) is answered by ``behaviours[n - 1]`` (the last one for any after)."""

    def __init__(self, *behaviours: str, body: bytes = ANSWER):
        self.behaviours = behaviours
        self.body = body
        self.connections = 0

    async def handle(self, reader, writer):
        self.connections += 1
        behaviour = self.behaviours[min(self.connections, len(self.behaviours)) - 1]
        try:
            await read_request(reader)
            if behaviour == "answer":
                answer(writer, self.body)
            elif behaviour == "reset":
                reset(writer)
                return
            elif behaviour == "silent":
                await asyncio.sleep(5)  # never answers within the client's timeout
            elif behaviour == "half-head":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-")
                await writer.drain()
                reset(writer)
                return
            elif behaviour == "cut-body":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(self.body) + self.body[:20])
                await writer.drain()
                reset(writer)
                return
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()  # "close": closed without a word


async def plain(client: LlamaClient) -> str:
    return (await client.post_json("/v1/chat/completions", {"messages": []}))["choices"][0]["message"]["content"]


async def streamed(client: LlamaClient) -> str:
    text = ""
    async for batch in client.stream_chat({"messages": []}):
        text += "".join(chunk["choices"][0]["delta"]["content"] for chunk in batch)
    return text


KINDS = [pytest.param(plain, ANSWER, id="plain"), pytest.param(streamed, STREAM, id="stream")]


def ask(upstream: Upstream, work, *, timeout: float = 5):
    async def main():
        listener = await asyncio.start_server(upstream.handle, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        client = LlamaClient(base_url=f"http://127.0.0.1:{port}", api_key="", timeout=timeout)
        try:
            return await work(client)
        finally:
            listener.close()

    return asyncio.run(main())


# (how each connection is answered, what the caller gets, how many connections were made)
CASES = [
    pytest.param(("close", "answer"), None, 2, id="closed-before-any-answer-then-answered"),
    pytest.param(("reset", "answer"), None, 2, id="reset-before-any-answer-then-answered"),
    pytest.param(("close",), LlamaUnavailable, 2, id="closed-twice-is-unavailable-not-broken"),
    pytest.param(("silent",), LlamaUnavailable, 1, id="a-timeout-is-not-retried"),
    pytest.param(("half-head",), LlamaUnavailable, 1, id="an-answer-that-began-is-not-retried"),
    # A stream cut mid-answer is broken; a plain request's answer cut is "not reachable", as before.
    pytest.param(("cut-body",), "cut", 1, id="a-body-that-began-is-not-retried"),
]


@pytest.mark.parametrize("work, body", KINDS)
@pytest.mark.parametrize("behaviours, error, connections", CASES)
def test_a_request_is_sent_once_more_only_when_nothing_of_it_ran(work, body, behaviours, error, connections):
    upstream = Upstream(*behaviours, body=body)
    if error is None:
        assert ask(upstream, work) == "Hello there"
    else:
        if error == "cut":
            error = LlamaStreamBroken if work is streamed else LlamaUnavailable
        with pytest.raises(error):
            ask(upstream, work, timeout=0.3 if "silent" in behaviours else 5)
    assert upstream.connections == connections


@pytest.mark.parametrize("work, body", KINDS)
def test_a_refused_connection_is_tried_once_more_after_a_pause_then_unavailable(work, body):
    attempts: list[float] = []

    async def main():
        loop = asyncio.get_running_loop()
        client = LlamaClient(base_url=f"http://127.0.0.1:{free_port()}", api_key="", timeout=5)
        real_connect = loop.sock_connect

        async def counted(sock, address):
            attempts.append(loop.time())
            return await real_connect(sock, address)

        loop.sock_connect = counted
        await work(client)

    with pytest.raises(LlamaUnavailable):
        asyncio.run(main())
    assert len(attempts) == 2 and attempts[1] - attempts[0] >= 0.09
