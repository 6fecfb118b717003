"""Counters in clock windows, kept in Redis so every web process shares them (turns a minute, sign-ups an hour)."""

from __future__ import annotations

import time

from monitor.public import sync_redis


def count_in_window(name: str, window_s: int) -> int:
    """Add one to ``name``'s counter for the current clock window of ``window_s`` seconds; returns the
    window's count so far (the counter lives two windows, then Redis drops it)."""
    key = f"{name}:{int(time.time() // window_s)}"
    pipe = sync_redis().pipeline()
    pipe.incr(key)
    pipe.expire(key, 2 * window_s)
    count, _expiry = pipe.execute()
    return int(count)
