"""Where the live figures are in Redis: each node's newest samples, and the keys by which open
dashboards make every node's sampler sample every second (``WATCHED_KEY``) and wake it (``wake_key``)."""

from __future__ import annotations

# Set (with a short expiry) by every open dashboard: while it exists, every node's sampler samples every
# MONITOR_SAMPLE_INTERVAL_S; with nobody watching, every MONITOR_IDLE_SAMPLE_INTERVAL_S, so a box
# nobody watches does not spend CPU on charts that the model could use (bench/cpu_bench.py).
WATCHED_KEY = "qwenweb:monitor:watched"


def live_key(node: str) -> str:
    """The node's newest samples, newest first (a list trimmed to the live window)."""
    return f"qwenweb:monitor:node:{node}:live"


def wake_key(node: str) -> str:
    """A dashboard that opens while nobody watched pushes here, for each node: that node's idle sampler
    waits on it (BLPOP), so the page's live figures start at once instead of after an idle interval."""
    return f"qwenweb:monitor:node:{node}:wake"
