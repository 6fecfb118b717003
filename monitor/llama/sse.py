"""Server-sent events as llama-server streams them, parsed without waiting for more than one network read.

The stream is hostile input like any answer: an event that is not a JSON object, or one
that never ends, breaks the stream (``LlamaStreamBroken``) rather than the caller.
"""

from __future__ import annotations

import orjson

from monitor.llama.errors import LlamaRejected, LlamaStreamBroken

# No event llama-server writes comes near this (an image's embedding is not streamed): a
# longer unfinished one is a broken or hostile upstream, not something to keep buffering.
MAX_EVENT_BYTES = 8 * 1024 * 1024


class SSEParser:
    """Server-sent events as llama-server writes them: ``data: {json}`` lines, blank-line separated."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> tuple[list[dict], bool]:
        """(chunks completed by ``data``, whether the stream said [DONE])."""
        buffer = self._buffer + data if self._buffer else data
        if b"\r" in buffer:  # CRLF line ends: rare, so the common read skips the copy
            buffer = buffer.replace(b"\r\n", b"\n")
        *events, self._buffer = buffer.split(b"\n\n")
        if len(self._buffer) > MAX_EVENT_BYTES:
            raise LlamaStreamBroken()
        chunks = []
        for event in events:
            if event.startswith(b"data:") and b"\n" not in event:
                payload = event[5:].lstrip()  # the per-token case: one data line
            else:
                payload = b"\n".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
            if not payload:
                continue  # comments and keep-alives
            if payload == b"[DONE]":
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
