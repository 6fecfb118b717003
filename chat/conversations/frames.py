"""What reaches one page: events coalesced into frames on a short clock.

A screen shows one picture every ~16.7 ms, so text that arrives within one frame time travels in
one WebSocket frame: fewer JSON encodings and fewer writes through Daphne per token, which is CPU
a small box otherwise takes from generation. Nothing a person sees gets later: the first text a
page receives goes out at once (time to first token is unchanged), and so does every event that
is not text (queue place, done, errors), carrying whatever text was pending before it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)
Send = Callable[[dict], Awaitable[None]]
DELTA_TYPES = frozenset({"token", "reasoning"})
# Text that comes this close to its frame's time goes now: the upstream reader is on the same clock
# (monitor.llama.wire), and a timer for a few hundred microseconds would cost a second wake-up per frame.
SLACK_S = 0.003


def coalesce(events: list[dict]) -> list[dict]:
    """Consecutive text events of one kind and message become one, carrying the last one's seq.

    The events are shared with other pages, so merged ones are new dicts; the inputs stay as they were.
    """
    merged: list[tuple[dict, list[str] | None]] = []
    for event in events:
        if merged and _joins(merged[-1][0], event):
            texts = merged[-1][1]
            texts.append(event["text"])
            merged[-1] = (event, texts)
        else:
            merged.append((event, [event["text"]] if event["type"] in DELTA_TYPES else None))
    return [event if not texts or len(texts) == 1 else {**event, "text": "".join(texts)} for event, texts in merged]


def _joins(previous: dict, event: dict) -> bool:
    return (
        event["type"] in DELTA_TYPES
        and previous["type"] == event["type"]
        and previous.get("message") == event.get("message")
    )


class FrameSender:
    """One socket's outgoing events, in order; text is flushed at most once per ``frame_s``."""

    def __init__(self, send: Send, frame_s: float, user_id: object = None):
        self.send = send
        self.frame_s = frame_s
        self.user_id = user_id  # whose page this is: runs deliver only to their owner's pages
        self.closed = False
        self._pending: list[dict] = []
        self._last_flush = float("-inf")
        self._timer: asyncio.TimerHandle | None = None
        self._flush_task: asyncio.Task | None = None
        self._flushing = False
        self._held = False
        self._sent_text = False

    async def push(self, event: dict) -> None:
        if self.closed:
            return
        self._pending.append(event)
        if self._held or self._flushing:
            return  # the hold's release or the running flush carries it
        is_text = event["type"] in DELTA_TYPES
        if is_text and self._timer is not None:
            return  # the frame's timer carries it
        wait = self._last_flush + self.frame_s - time.monotonic()
        if not is_text or not self._sent_text or wait <= SLACK_S:
            await self.flush()
        else:
            self._timer = asyncio.get_running_loop().call_later(wait, self._on_timer)

    def hold(self) -> None:
        """Keep what is pushed until ``release``: a page's snapshot must reach it before the live text after it."""
        self._held = True

    async def release(self, first: list[dict]) -> None:
        self._held = False
        self._pending[:0] = first
        await self.flush()

    def _on_timer(self) -> None:
        self._timer = None
        self._flush_task = asyncio.ensure_future(self.flush())

    async def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flushing or self._held:
            return
        self._flushing = True
        try:
            while self._pending and not self.closed:
                events, self._pending = coalesce(self._pending), []
                self._last_flush = time.monotonic()
                for event in events:
                    # Text right after any other event (started, a snapshot) is the first of its kind: at once.
                    self._sent_text = event["type"] in DELTA_TYPES
                    await self.send(event)
        except Exception:  # the socket went away; the answer goes on for the other pages
            log.debug("could not deliver to a page", exc_info=True)
            self.close()
        finally:
            self._flushing = False

    def close(self) -> None:
        self.closed = True
        self._pending = []
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
