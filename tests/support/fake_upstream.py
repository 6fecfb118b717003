"""A fake llama-server for the stream reader (``monitor/llama/wire.py``): a few lines of asyncio
that write HTTP/1.1 the way llama-server does (chunked SSE), in the order a test sets, and the
protocol edges the real server never produces. Used by tests/unit/test_wire_stream.py and
bench/pacing_bench.py.

The fake and the client share one event loop, so the fake can wait for what the client has handed
on (``Handed``) before it writes more: a test orders the stream by what the reader did, never by
the clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from monitor.llama.client import LlamaClient

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
END = b"data: [DONE]\n\n"


def event(text: str) -> bytes:
    return b'data: {"choices":[{"delta":{"content":"%s"}}]}\n\n' % text.encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


LAST_CHUNK = chunk(END) + b"0\r\n\r\n"  # the end marker and the chunked body's end


class Handed:
    """What the client handed on so far (its reads or its batches, in order), for the fake to wait on."""

    def __init__(self) -> None:
        self.items: list = []
        self._grew = asyncio.Event()

    def add(self, item) -> None:
        self.items.append(item)
        self._grew.set()

    async def reach(self, count: int) -> None:
        """Until the client has handed on ``count`` things."""
        while len(self.items) < count:
            self._grew.clear()
            await self._grew.wait()


Handler = Callable[[asyncio.StreamWriter], Awaitable[None]]


async def serve(handler: Handler, *, timeout_s: float = 3600) -> tuple[LlamaClient, asyncio.Server, list[bytes]]:
    """(a client for it, the server, the requests it saw): the fake upstream on a loopback port.

    Each connection's request is read whole, then ``handler(writer)`` answers; the connection is
    closed when it returns. The client's read timeout (``timeout_s``) is an hour unless given: it
    never gives up by itself within a test, whose own guard says what it waited for."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
        )
        seen.append(head + await reader.readexactly(length))
        try:
            await handler(writer)
        except ConnectionError:
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = LlamaClient(base_url=f"http://127.0.0.1:{port}", api_key="secret", timeout=timeout_s, ca_file="")
    return client, server, seen


async def loop_turns(count: int = 20) -> None:
    """Let the event loop go round ``count`` times: a reader that is not asleep would read what came."""
    for _ in range(count):
        await asyncio.sleep(0)


async def write_apart(writer: asyncio.StreamWriter, pieces: list[bytes]) -> None:
    """Each piece written on its own, the loop let round between two (a reader awake reads each)."""
    for piece in pieces:
        writer.write(piece)
        await writer.drain()
        await loop_turns()
