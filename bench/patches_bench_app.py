"""The web process for bench/patches_bench.py (not the product): `python patches_bench_app.py PORT [PATCH...]`.

Daphne started as `qwenweb.serve` starts it (the same arguments, Twisted's asyncio reactor), with
the product's patches (`qwenweb.patches`) installed except the ones named, serving two streams
paced on a clock as an answer's frames are, and the product's own HTTP stack for everything else:

- ``/ws/frames/``: a WebSocket behind the product's own socket stack (origin check, session and
  user, language; ``qwenweb.asgi``) whose consumer is a chat consumer's kind
  (``AsyncJsonWebsocketConsumer``, orjson): each message ``{"frames": N, "every_ms": M}`` is
  answered with N small JSON frames, one every M ms, then ``{"type": "done"}``;
- ``/stream/?frames=N&every_ms=M``: an HTTP answer of N server-sent-event chunks, as the gateway
  streams;
- any other path: the product's Django, ``/v1/`` on the API's handler (or, with ``api_handler``
  left out, on the pages' stack, as Django alone would run it).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from urllib.parse import parse_qs

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")

DELTA = {"type": "delta", "text": " lighthouse", "seq": 0}
SSE = b'data: {"choices":[{"index":0,"delta":{"content":" lighthouse"}}]}\n\n'


def _pace(query: dict) -> tuple[int, float]:
    return int(query.get("frames", 100)), int(query.get("every_ms", 2)) / 1000


async def stream(scope, receive, send) -> None:
    frames, every_s = _pace({k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()})
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for _ in range(frames):
        await asyncio.sleep(every_s)
        await send({"type": "http.response.body", "body": SSE, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


def application(leave_out: set[str]):
    from channels.auth import AuthMiddlewareStack
    from channels.generic.websocket import AsyncJsonWebsocketConsumer
    from channels.routing import ProtocolTypeRouter, URLRouter
    from django.urls import path

    from qwenweb.access_log import AccessLog
    from qwenweb.api_middleware import ByPath
    from qwenweb.asgi import django_asgi_app
    from qwenweb.body_limit import RequestBodyLimit
    from qwenweb.origin import SameOriginValidator
    from qwenweb.patches.api_handler import ApiHandler
    from qwenweb.socket_language import SocketLanguage

    class Frames(AsyncJsonWebsocketConsumer):
        @classmethod
        async def encode_json(cls, content) -> str:
            return orjson.dumps(content).decode()

        async def receive_json(self, content, **kwargs):
            frames, every_s = _pace(content)
            for seq in range(frames):
                await asyncio.sleep(every_s)
                await self.send_json({**DELTA, "seq": seq})
            await self.send_json({"type": "done"})

    pages = RequestBodyLimit(django_asgi_app if "api_handler" in leave_out else ByPath(ApiHandler(), django_asgi_app))

    async def http(scope, receive, send):
        if scope["path"] == "/stream/":
            return await stream(scope, receive, send)
        return await pages(scope, receive, send)

    sockets = URLRouter([path("ws/frames/", Frames.as_asgi())])
    websocket = SameOriginValidator(AuthMiddlewareStack(SocketLanguage(sockets)))
    return AccessLog(ProtocolTypeRouter({"http": http, "websocket": websocket}))


def main() -> None:
    port, leave_out = sys.argv[1], set(sys.argv[2:])
    import django

    django.setup(set_prefix=False)
    from daphne.cli import CommandLineInterface

    from qwenweb import patches
    from qwenweb.serve import daphne_argv

    patches.install("web", leave_out=tuple(leave_out))  # before qwenweb.asgi's own install, which then changes nothing
    global app
    app = application(leave_out)
    sys.modules["patches_bench_app"] = sys.modules[__name__]  # what Daphne imports the app from
    argv = daphne_argv(["--bind", "127.0.0.1", "--port", port])
    argv[-1] = "patches_bench_app:app"
    CommandLineInterface().run(argv)


if __name__ == "__main__":
    main()
