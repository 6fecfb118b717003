"""What the relay passes on: llama-server's answers, as they came, less what tells how much of a
prompt was cached, and the usage they report. Streams are watched as bytes (``StreamTally``),
never decoded per token."""

from __future__ import annotations

import orjson


def usage_of(answer: dict) -> tuple[int, int]:
    """(prompt, output) tokens from an answer's ``usage``, else its llama.cpp ``timings``."""
    usage = answer.get("usage")
    if isinstance(usage, dict):
        return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    timings = answer.get("timings")
    if isinstance(timings, dict):
        prompt = int(timings.get("prompt_n") or 0) + int(timings.get("cache_n") or 0)
        return prompt, int(timings.get("predicted_n") or 0)
    return 0, 0


def timings_of(answer: dict) -> dict:
    """What an answer's llama.cpp ``timings`` say of its prompt and output, as the serving slot
    remembers them (the node now holding the conversation's cache, and what recomputing it costs)."""
    timings = answer.get("timings")
    if not isinstance(timings, dict):
        return {}
    return {
        "prompt_tokens": timings.get("prompt_n"),
        "cached_tokens": timings.get("cache_n"),
        "output_tokens": timings.get("predicted_n"),
        "prompt_per_second": timings.get("prompt_per_second"),
    }


def drop_cache_figures(answer: dict) -> bool:
    """Remove what tells how much of the prompt was already cached (another caller's prefix may be
    what was cached): llama-server's ``timings`` and ``tokens_cached``, and ``usage``'s
    ``cached_tokens``. True when something was removed."""
    removed = answer.pop("timings", None) is not None
    removed |= answer.pop("tokens_cached", None) is not None
    usage = answer.get("usage")
    if isinstance(usage, dict):
        removed |= usage.pop("prompt_tokens_details", None) is not None
    return removed


def without_cache_figures(event: bytes) -> bytes:
    """An SSE event with its ``data:`` JSON's cache figures removed (unchanged when it has none or is not JSON)."""
    lines = event.split(b"\n")
    for index, line in enumerate(lines):
        if line.startswith(b"data:"):
            try:
                chunk = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                continue
            if isinstance(chunk, dict) and drop_cache_figures(chunk):
                lines[index] = b"data: " + orjson.dumps(chunk)
    return b"\n".join(lines)


# What makes an event more than bytes to pass on: figures to strip and count, the end, an error.
# A model's text cannot forge them: inside a JSON string its quotes are escaped.
_MARKS = (b'"timings"', b'"usage"', b"[DONE]", b'"error"')


class StreamTally:
    """Watches relayed SSE bytes: whether ``[DONE]`` or an error event came, and the last event with figures.

    Only splits events and searches bytes; the events with figures (the last ones) are decoded
    and re-encoded without the cache figures (``drop_cache_figures``): the only per-event work
    is one search. ``[DONE]`` is held back as ``end``, for the relay to send once the usage is
    counted (a client that reads its usage right after the stream finds it).
    """

    def __init__(self) -> None:
        self._partial = b""
        self._figures = b""
        self.events = 0
        self.finished = False  # [DONE] or an error event from llama-server
        self.end = b""  # the [DONE] event, held back

    def feed(self, data: bytes) -> bytes:
        """The whole events completed by ``data``, ready to relay (a partial event waits for its end)."""
        if not self._partial and data.endswith(b"\n\n") and not any(mark in data for mark in _MARKS):
            # The per-token read: whole events, nothing to rewrite or watch for. Relayed as it came.
            self.events += data.count(b"\n\n")
            return data
        *events, self._partial = (self._partial + data).split(b"\n\n")
        relayed = []
        for event in events:
            self.events += 1
            if event.startswith(b"data: [DONE]"):
                self.finished, self.end = True, event + b"\n\n"
                continue
            if b'"timings"' in event or b'"usage"' in event:
                self._figures = event
                event = without_cache_figures(event)
            elif event.startswith(b'data: {"error"'):
                self.finished = True
            relayed.append(event + b"\n\n")
        return b"".join(relayed)

    def close(self) -> bytes:
        """The last event when the stream ended without its blank line."""
        return self.feed(b"\n\n") if self._partial.strip() else b""

    def usage(self) -> tuple[int, int]:
        """(prompt, output) tokens; when the stream was cut before its figures, output counts its events."""
        figures = self._figures_event()
        if figures is None:
            return 0, self.events
        try:
            return usage_of(figures)
        except (TypeError, ValueError):
            return 0, self.events

    def timings(self) -> dict:
        """llama-server's figures of the answer (``timings_of``), when they came."""
        figures = self._figures_event()
        return timings_of(figures) if figures is not None else {}

    def _figures_event(self) -> dict | None:
        for line in self._figures.split(b"\n"):
            if line.startswith(b"data:"):
                try:
                    chunk = orjson.loads(line[5:])
                except orjson.JSONDecodeError:
                    return None
                return chunk if isinstance(chunk, dict) else None
        return None
