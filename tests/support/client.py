"""A person's side of the app for tests and benchmarks: an HTTP session and the chat socket."""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Iterator

import httpx
from websockets.sync.client import ClientConnection, connect


def base_url() -> str:
    return f"http://127.0.0.1:{os.environ['QWENWEB_PORT']}"


@contextlib.contextmanager
def talking_to(port: str) -> Iterator[None]:
    """While the block runs, these helpers talk to the web process on ``port`` (another than the session's)."""
    previous = os.environ["QWENWEB_PORT"]
    os.environ["QWENWEB_PORT"] = port
    try:
        yield
    finally:
        os.environ["QWENWEB_PORT"] = previous


def make_user(username: str | None = None, password: str = "pass-Word-123", **extra):
    from django.contrib.auth import get_user_model

    username = username or f"user-{uuid.uuid4().hex[:8]}"
    user = get_user_model().objects.create_user(username=username, password=password, **extra)
    user.raw_password = password
    return user


def login(user) -> httpx.Client:
    """Log in through the real login form; returns a client holding the session cookie."""
    client = httpx.Client(base_url=base_url(), follow_redirects=True, timeout=30)
    page = client.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = client.post(
        "/login/",
        data={"username": user.username, "password": user.raw_password, "csrfmiddlewaretoken": token},
        headers={"Referer": base_url() + "/login/"},
    )
    assert "sessionid" in client.cookies, response.text[:500]
    return client


def upload_document(http: httpx.Client, name: str, data: bytes, **fields) -> httpx.Response:
    """Upload a file through the chat page's form endpoint, as the page's script does."""
    page = http.get("/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return http.post(
        "/documents/upload/",
        data=fields,
        files={"file": (name, data)},
        headers={"X-CSRFToken": token, "Referer": base_url() + "/"},
    )


def _socket(path: str, http: httpx.Client | None, origin: str | None = None) -> ClientConnection:
    headers = {}
    if http is not None:
        headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in http.cookies.items())
    return connect(
        base_url().replace("http", "ws") + path,
        origin=origin if origin is not None else base_url(),
        additional_headers=headers,
        max_size=None,
        open_timeout=10,
    )


def chat_socket(http: httpx.Client | None, origin: str | None = None) -> ClientConnection:
    return _socket("/ws/chat/", http, origin)


def dashboard_socket(http: httpx.Client | None) -> ClientConnection:
    """The staff dashboard's live socket (its samples and node cards, about once a second)."""
    return _socket("/ws/monitor/", http)


def send(ws: ClientConnection, **payload) -> None:
    ws.send(json.dumps(payload))


def events_until(ws: ClientConnection, stop_type: str = "done", timeout: float = 120) -> list[dict]:
    """Every event up to and including the first of ``stop_type`` (or an error)."""
    events = []
    while True:
        event = json.loads(ws.recv(timeout=timeout))
        events.append(event)
        if event["type"] in (stop_type, "error"):
            return events


def text_of(events: list[dict], kind: str = "token") -> str:
    return "".join(e["text"] for e in events if e["type"] == kind)
