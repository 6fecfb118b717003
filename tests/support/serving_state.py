"""The serving layer's per-process objects made anew between tests (each test starts from what it makes)."""

from __future__ import annotations

from monitor.serving import slot


def forget_queues() -> None:
    """Drop this process's fair-queue objects."""
    slot.pool_queue.cache_clear()
