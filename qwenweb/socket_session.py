"""The WebSocket's Django session, without channels' per-message send wrapper.

channels' ``SessionMiddleware`` wraps ``send`` to save the session and set its cookie on
``http.response.start``, a message a WebSocket never sends; yet for every message it reads the
session's ``modified`` flag and ``is_empty()`` through Django's lazy proxies first: Python work for
every streamed frame of every answer (bench/cpu_bench.py, ``chat_web_cpu_s_per_1k_tokens``). Here
the session is resolved from the handshake's cookie exactly as channels does (AuthMiddleware reads
the user from it), and the socket's messages go to the server's own ``send``. A consumer that
changes the session saves it itself, as channels requires for sockets anyway.
"""

from __future__ import annotations

from channels.auth import AuthMiddleware
from channels.sessions import CookieMiddleware, InstanceSessionWrapper, SessionMiddleware


class SocketSessionMiddleware(SessionMiddleware):
    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await super().__call__(scope, receive, send)
        wrapper = InstanceSessionWrapper(scope, send)
        await wrapper.resolve_session()
        return await self.inner(wrapper.scope, receive, send)


def SocketAuthStack(inner):  # noqa: N802 (named as channels' AuthMiddlewareStack, which it replaces)
    """channels' ``AuthMiddlewareStack`` (cookies, session, user) with ``SocketSessionMiddleware``."""
    return CookieMiddleware(SocketSessionMiddleware(AuthMiddleware(inner)))
