"""A person using the product while its parts are killed: a long streamed answer, short
questions afterwards, and checks of what was stored (tests/integration/test_faults.py, the
restart benchmark)."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from websockets.sync.client import ClientConnection

from tests.support.client import chat_socket, login, send
from tests.support.stack import wait_until
from tests.support.supervised import Supervised, query, stored_messages

LONG_PROMPT = "Write a very long story about a lighthouse keeper, chapter after chapter."
FINISHED = {"complete", "stopped", "incomplete", "error"}
CREATE_USER = (
    "from django.contrib.auth import get_user_model; get_user_model().objects.create_user(username={!r}, password={!r})"
)


def make_person(stack: Supervised, username: str, password: str = "pass-Word-123") -> SimpleNamespace:
    """A person with an account in the supervised run's own database."""
    stack.manage("shell", "-c", CREATE_USER.format(username, password))
    return SimpleNamespace(username=username, raw_password=password)


@dataclass
class Person:
    """One logged-in person; the texts they sent, in order, to check what was stored."""

    user: SimpleNamespace
    sent: list[str] = field(default_factory=list)
    conversation: str | None = None
    ws: ClientConnection | None = None

    def __post_init__(self):
        self.http = login(self.user)

    def connect(self, timeout: float = 120) -> ClientConnection:
        """The page's socket, reconnecting until the web server takes it (it may be restarting)."""
        holder = []
        wait_until(lambda: holder.append(chat_socket(self.http)) or True, timeout, "the chat socket")
        self.ws = holder[0]
        return self.ws

    def event(self, timeout: float = 120) -> dict:
        return json.loads(self.ws.recv(timeout=timeout))

    def ask(self, text: str, max_tokens: int) -> int:
        """Send a question; returns the answer's message id once it is accepted."""
        self.sent.append(text)
        send(self.ws, type="send", conversation=self.conversation, text=text, options={"max_tokens": max_tokens})
        while True:
            event = self.event()
            assert event["type"] != "error", event
            if event["type"] == "accepted":
                self.conversation = event["conversation"]
                return event["assistant_message"]["id"]

    def first_token(self, message_id: int) -> bool:
        """Wait for the answer's first token; False if it ended first."""
        while True:
            event = self.event(180)
            if event.get("message") == message_id and event["type"] == "token":
                return True
            if event.get("message") == message_id and event["type"] == "done":
                return False

    def start_long_answer(self, max_tokens: int) -> int:
        """An answer that is streaming right now (started again if one ends before its first token)."""
        for _attempt in range(3):
            message_id = self.ask(f"{LONG_PROMPT} ({len(self.sent)})", max_tokens)
            if self.first_token(message_id):
                return message_id
        raise AssertionError("no answer kept streaming")

    def until_done(self, message_id: int, timeout: float = 180) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            event = self.event(max(1.0, deadline - time.monotonic()))
            if event.get("message") == message_id and event["type"] == "done":
                return event

    def history(self) -> dict[int, dict]:
        """The conversation's stored messages by id, as the page asks for them when it reconnects."""
        send(self.ws, type="history", conversation=self.conversation)
        while True:
            event = self.event()
            if event["type"] == "history":
                return {message["id"]: message for message in event["messages"]}

    def stored(self, var_dir: Path) -> list[tuple]:
        """This person's conversation as stored: (id, role, content, status, error)."""
        return [row for row in stored_messages(var_dir) if row[0] in self.message_ids(var_dir)]

    def message_ids(self, var_dir: Path) -> set[int]:
        hex_id = self.conversation.replace("-", "")
        return {row[0] for row in query(var_dir, "SELECT id FROM chat_message WHERE conversation_id = ?", (hex_id,))}


def lost_or_doubled(person: Person, var_dir: Path) -> int:
    """Messages the person sent that are not stored exactly once, and answers missing or doubled:
    each question has one answer right after it."""
    rows = person.stored(var_dir)
    questions = [row[2] for row in rows if row[1] == "user"]
    answers = [row for row in rows if row[1] == "assistant"]
    sent, kept = Counter(person.sent), Counter(questions)
    lost = sum((sent - kept).values()) + sum((kept - sent).values())
    return lost + abs(len(answers) - len(questions))


def still_streaming(var_dir: Path) -> list[tuple]:
    return [row for row in stored_messages(var_dir) if row[3] == "streaming"]


class StreamedApiAnswer:
    """An OpenAI-API answer streaming in a thread of its own (an agent's call), read to its end: whether it
    reached ``[DONE]`` without an error event, and its text."""

    def __init__(self, base_url: str, key: str, body: dict):
        import threading

        import httpx

        self.client = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=600)
        self.body = {**body, "stream": True}
        self.first_bytes = threading.Event()
        self.finished = threading.Event()
        self.complete = False
        self.error = ""
        self.text: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            with self.client.stream("POST", "/v1/chat/completions", json=self.body) as response:
                for line in response.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    if line == "data: [DONE]":
                        self.complete = not self.error
                        continue
                    chunk = json.loads(line[6:])
                    if "error" in chunk:
                        self.error = str(chunk["error"])
                    for choice in chunk.get("choices") or ():
                        if (choice.get("delta") or {}).get("content"):
                            self.text.append(choice["delta"]["content"])
                            self.first_bytes.set()
        except Exception as error:  # the call broke: it did not complete
            self.error = repr(error)
        finally:
            self.first_bytes.set()
            self.finished.set()
