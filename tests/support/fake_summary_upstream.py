"""FAKE UPSTREAM for what a small real model cannot be made to write on demand: a loopback
server that answers like llama-server, but whose summaries cite pages that do not exist,
echo their instructions, or copy their source. The default Gemma 270M model cannot be
steered into any of these, so the checks that must strip or flag them are fed from here.
Everything else in the tests uses the real llama-server.

It serves ``/props``, ``/apply-template``, ``/tokenize`` (one token a word) and streamed
``/v1/chat/completions``, answering each request with ``answer(system, user)`` and
recording every (system, user) pair it got. (Images read by a model go through the real
llama-server with a vision projector: tests/support/qwen35.py.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

from tests.support.loopback import LoopbackServer, sse

Answer = Callable[[str, str], str]


def _chunk(delta: dict, finish: str | None = None) -> dict:
    choice = {"finish_reason": finish, "index": 0, "delta": delta}
    return {"choices": [choice], "created": 1, "id": "chatcmpl-fake", "model": "fake-summary", "object": "x"}


class FakeSummaryUpstream(LoopbackServer):
    def __init__(self, answer: Answer, *, n_ctx: int = 1024, slots: int = 1) -> None:
        self.requests: list[tuple[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                props = {"default_generation_settings": {"n_ctx": n_ctx}, "total_slots": slots, "model_alias": "fake"}
                props["modalities"] = {"vision": False}
                self._send(json.dumps(props).encode())

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/tokenize":
                    return self._send(json.dumps({"tokens": [0] * (len(body["content"].split()) + 1)}).encode())
                if self.path == "/apply-template":
                    prompt = "\n".join(message["content"] for message in body["messages"])
                    return self._send(json.dumps({"prompt": prompt}).encode())
                messages = {message["role"]: message["content"] for message in body["messages"]}
                system, user = messages.get("system", ""), messages.get("user", "")
                owner.requests.append((system, user))
                text = answer(system, user)
                chunks = [_chunk({"content": text[i : i + 20]}) for i in range(0, len(text), 20)]
                chunks.append(_chunk({}, "stop"))
                self._send(sse(chunks), "text/event-stream")

        super().__init__(Handler)
