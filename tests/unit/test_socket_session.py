"""The WebSocket's session middleware (qwenweb/socket_session.py): the session and user are in the
socket's scope as with channels' own stack, and its messages go to the server's send unwrapped."""

from __future__ import annotations

from asgiref.sync import async_to_sync

from qwenweb.socket_session import SocketAuthStack


def _through_stack(scope_type: str):
    seen = {}

    async def inner(scope, receive, send):
        seen.update(scope=scope, send=send)

    async def receive():
        return {}

    async def send(message):
        pass

    scope = {"type": scope_type, "path": "/ws/chat/", "headers": [(b"cookie", b"lang=en")]}
    async_to_sync(SocketAuthStack(inner))(scope, receive, send)
    return seen, send


def test_a_sockets_messages_go_straight_to_the_server():
    seen, send = _through_stack("websocket")
    assert seen["send"] is send  # no per-message session wrapper
    assert "session" in seen["scope"] and "user" in seen["scope"] and seen["scope"]["cookies"] == {"lang": "en"}


def test_an_http_scope_keeps_channels_session_saving():
    seen, send = _through_stack("http")
    assert seen["send"] is not send  # saves the session and sets its cookie on http.response.start
    assert "session" in seen["scope"]
