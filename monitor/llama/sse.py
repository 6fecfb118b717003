"""Server-sent events as llama-server streams them, parsed without waiting for more than one network read.

The stream is hostile input like any answer: an event that is not a JSON object, or one
that never ends, breaks the stream (``LlamaStreamBroken``) rather than the caller.
``carries_answer`` and ``AnswerWatch`` say when an answer's text (or tool call) begins, which
starts the frame clock of ``monitor.llama.wire``.
"""

from __future__ import annotations

import orjson

from monitor.llama.errors import LlamaRejected, LlamaStreamBroken

# No event llama-server writes comes near this (an image's embedding is not streamed): a
# longer unfinished one is a broken or hostile upstream, not something to keep buffering.
MAX_EVENT_BYTES = 8 * 1024 * 1024
DONE = b"[DONE]"
# What an OpenAI-shaped streamed choice carries once the answer has begun: its delta's text,
# reasoning or tool call (chat), or its own text (/v1/completions). The role chunk and prompt
# progress carry none of these.
ANSWER_DELTA_FIELDS = ("content", "reasoning_content", "tool_calls")


class SSEParser:
    """Server-sent events as llama-server writes them: ``data: {json}`` lines, blank-line separated."""

    def __init__(self) -> None:
        self._buffer = b""

    def payloads(self, data: bytes) -> list[bytes]:
        """The data of each event ``data`` completes (comments and keep-alives left out)."""
        buffer = self._buffer + data if self._buffer else data
        if b"\r" in buffer:  # CRLF line ends: rare, so the common read skips the copy
            buffer = buffer.replace(b"\r\n", b"\n")
        *events, self._buffer = buffer.split(b"\n\n")
        if len(self._buffer) > MAX_EVENT_BYTES:
            raise LlamaStreamBroken()
        payloads = []
        for event in events:
            if event.startswith(b"data:") and b"\n" not in event:
                payload = event[5:].lstrip()  # the per-token case: one data line
            else:
                payload = b"\n".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
            if payload:
                payloads.append(payload)
        return payloads

    def feed(self, data: bytes) -> tuple[list[dict], bool]:
        """(chunks completed by ``data``, whether the stream said [DONE])."""
        chunks = []
        for payload in self.payloads(data):
            if payload == DONE:
                return chunks, True
            chunks.append(_chunk(payload))
        return chunks, False


def _chunk(payload: bytes) -> dict:
    """One event's JSON object; an error event raises LlamaRejected with llama-server's message."""
    try:
        chunk = orjson.loads(payload)  # the token stream's hot path: orjson is several times faster
    except orjson.JSONDecodeError as error:
        raise LlamaStreamBroken() from error
    if not isinstance(chunk, dict):
        raise LlamaStreamBroken()
    if "error" in chunk:
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else error
        raise LlamaRejected(str(message)[:500] if message else None)
    return chunk


def carries_answer(chunk: dict) -> bool:
    """Whether a streamed chunk carries answer text, reasoning or a tool call."""
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict) and any(delta.get(field) for field in ANSWER_DELTA_FIELDS):
            return True
        if choice.get("text"):
            return True
    return False


class AnswerWatch:
    """Watches a relayed stream's raw bytes until its answer begins; only until then, so an
    answer's tokens cost nothing here. Never raises: the relay's caller judges the stream."""

    def __init__(self) -> None:
        self._parser: SSEParser | None = SSEParser()

    def feed(self, data: bytes) -> bool:
        """True once (and from) the bytes that completed the first event carrying answer text."""
        if self._parser is None:
            return True
        try:
            for payload in self._parser.payloads(data):
                if payload != DONE and carries_answer(_object(payload)):
                    self._parser = None
                    return True
        except LlamaStreamBroken:
            self._parser = None  # an event too long to be llama-server's: stop looking, pace as for text
            return True
        return False


def _object(payload: bytes) -> dict:
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
