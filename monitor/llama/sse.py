"""Server-sent events as llama-server streams them, parsed without waiting for more than one network read."""

from __future__ import annotations

import orjson

from monitor.llama.errors import LlamaRejected


class SSEParser:
    """Server-sent events as llama-server writes them: ``data: {json}`` lines, blank-line separated."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> tuple[list[dict], bool]:
        """(chunks completed by ``data``, whether the stream said [DONE])."""
        self._buffer += data
        *events, self._buffer = self._buffer.replace(b"\r\n", b"\n").split(b"\n\n")
        chunks = []
        for event in events:
            payload = b"\n".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
            if not payload:
                continue  # comments and keep-alives
            if payload == b"[DONE]":
                return chunks, True
            chunk = orjson.loads(payload)  # the token stream's hot path: orjson is several times faster
            if "error" in chunk:
                error = chunk["error"]
                raise LlamaRejected(error.get("message") if isinstance(error, dict) else str(error))
            chunks.append(chunk)
        return chunks, False
