"""The least a relay of llama-server's stream can do, for bench/relay_floor_bench.py (not the product).

Both relays read llama-server with the product's own reader (``LlamaClient.stream_raw``, as the
gateway does) on the same frame clock, and forward its bytes untouched: no Django, no key, quota,
queue or parsing.

- ``daphne PORT``: a bare ASGI app under Daphne as the product runs it (Twisted's asyncio
  reactor, the web process's patches, ``qwenweb.patches``): HTTP answers as chunked SSE, and a WebSocket whose
  every message is a question answered in binary frames;
- ``asyncio PORT``: a bare asyncio server (no Twisted), HTTP only.

The upstream comes from the environment: ``FLOOR_LLAMA_URL``, ``FLOOR_LLAMA_KEY``,
``FLOOR_LLAMA_MODEL``, and the frame clocks ``FLOOR_FRAME_MS`` (HTTP) and ``FLOOR_WS_FRAME_MS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monitor.llama.client import LlamaClient  # noqa: E402

MAX_HEAD_BYTES = 64 * 1024


def _frame_s(name: str = "FLOOR_FRAME_MS") -> float:
    return int(os.environ.get(name, "50")) / 1000


@functools.cache
def _client() -> LlamaClient:
    """The product's client, every setting given (no Django settings here); the model: the loaded one."""
    return LlamaClient(
        base_url=os.environ["FLOOR_LLAMA_URL"],
        api_key=os.environ["FLOOR_LLAMA_KEY"],
        timeout=300,
        model=os.environ["FLOOR_LLAMA_MODEL"],
        ca_file="",
    )


def _upstream(question: bytes, frame_s: float) -> AsyncIterator[bytes]:
    """llama-server's stream for a chat request's JSON body."""
    return _client().stream_raw("/v1/chat/completions", orjson.loads(question), pace_s=frame_s)


async def application(scope, receive, send) -> None:
    if scope["type"] == "http":
        await _http(receive, send)
    elif scope["type"] == "websocket":
        await _websocket(receive, send)


async def _http(receive, send) -> None:
    question = b""
    while True:
        message = await receive()
        question += message.get("body", b"")
        if not message.get("more_body"):
            break
    async with contextlib.aclosing(_upstream(question, _frame_s())) as stream:
        first = await anext(stream)  # answering: the head read, the status fine
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": first, "more_body": True})
        async for data in stream:
            await send({"type": "http.response.body", "body": data, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def _websocket(receive, send) -> None:
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] != "websocket.receive":
            return
        question = (message.get("text") or "").encode() or message.get("bytes") or b"{}"
        async with contextlib.aclosing(_upstream(question, _frame_s("FLOOR_WS_FRAME_MS"))) as stream:
            async for data in stream:
                await send({"type": "websocket.send", "bytes": data})


async def _plain_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        async with contextlib.aclosing(_upstream(await reader.readexactly(length), _frame_s())) as stream:
            first = await anext(stream)  # answering: the head read, the status fine
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            )
            writer.write(b"%x\r\n%s\r\n" % (len(first), first))
            async for data in stream:
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
    finally:
        writer.close()


async def _serve_plain(port: int) -> None:
    server = await asyncio.start_server(_plain_http, "127.0.0.1", port, limit=MAX_HEAD_BYTES)
    async with server:
        await server.serve_forever()


def main() -> None:
    kind, port = sys.argv[1], sys.argv[2]
    if kind == "asyncio":
        asyncio.run(_serve_plain(int(port)))
        return
    import django
    from daphne.cli import CommandLineInterface  # installs Twisted's asyncio reactor, as qwenweb.serve does

    django.setup(set_prefix=False)  # the product's settings, from its environment
    from qwenweb import patches

    patches.install("web")
    CommandLineInterface().run(["--bind", "127.0.0.1", "--port", port, "relay_floor_apps:application"])


if __name__ == "__main__":
    main()
