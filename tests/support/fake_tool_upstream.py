"""FAKE UPSTREAM for one protocol edge: a loopback server that answers like llama-server
with a streamed tool call. The default Gemma 270M model with its template does not emit
tool calls (llama-server applies no tool grammar for it), so the streamed ``tool_calls``
deltas the gateway must relay untouched come from here. Everything else in the tests
uses the real llama-server.

It serves ``/props`` (the gateway reads the slot count) and ``/v1/chat/completions``,
streamed or not, and records each request body it got.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

from tests.support.loopback import LoopbackServer, sse

CALL_ID = "call_fake_0001"
ARGUMENT_PIECES = ['{"city', '": "Par', 'is"}']


def _chunk(delta: dict, finish: str | None = None, **extra) -> dict:
    return {
        "choices": [{"finish_reason": finish, "index": 0, "delta": delta}],
        "created": 1,
        "id": "chatcmpl-fake",
        "model": "fake-tools",
        "object": "chat.completion.chunk",
        **extra,
    }


def stream_chunks() -> list[dict]:
    chunks = [_chunk({"role": "assistant", "content": None})]
    chunks.append(_chunk({"reasoning_content": "The user wants the weather."}))
    chunks.append(
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": CALL_ID,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        )
    )
    for piece in ARGUMENT_PIECES:
        chunks.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    chunks.append(_chunk({}, "tool_calls", timings={"prompt_n": 30, "cache_n": 0, "predicted_n": 12}))
    return chunks


class FakeToolUpstream(LoopbackServer):
    def __init__(self) -> None:
        self.bodies: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path.startswith("/props"):
                    return self._send(200, json.dumps({"total_slots": 1, "default_generation_settings": {}}).encode())
                self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.bodies.append(body)
                if not body.get("stream"):
                    answer = {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": 1,
                        "model": "fake-tools",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "tool_calls",
                                "message": {
                                    "role": "assistant",
                                    "content": None,
                                    "tool_calls": [
                                        {
                                            "id": CALL_ID,
                                            "type": "function",
                                            "function": {"name": "get_weather", "arguments": "".join(ARGUMENT_PIECES)},
                                        }
                                    ],
                                },
                            }
                        ],
                        "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
                    }
                    return self._send(200, json.dumps(answer).encode())
                self._send(200, sse(stream_chunks()), "text/event-stream")

        super().__init__(Handler)
