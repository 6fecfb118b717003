"""The web process gives the memory it freed back to the system, at most once a minute.

What it keeps after an answer or a socket has ended is mostly freed C heap that glibc keeps (it
returns memory by itself only from the top of its heap); ``malloc_trim(0)`` gives it back. So when
an answer ends or a socket closes, and the last trim is at least ``TRIM_INTERVAL_S`` old, it runs in a
worker thread (ctypes releases the GIL). Without glibc (no ``malloc_trim``) nothing is done. The
measurements: docs/operations.md, "Over a month".
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import time

log = logging.getLogger(__name__)
TRIM_INTERVAL_S = 60.0


def _malloc_trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class HeapTrimmer:
    """Runs ``trim`` after an end (``ended()``), at most once per ``interval_s``, off the event loop."""

    def __init__(self, trim=None, interval_s: float = TRIM_INTERVAL_S):
        self.trim = trim if trim is not None else _malloc_trim()
        self.interval_s = interval_s
        self.last = time.monotonic()
        self.trims = 0
        self._running: asyncio.Future | None = None

    def ended(self) -> None:
        """An answer or a socket ended (called on the event loop): trim if one is due."""
        if self.trim is None or self._running is not None or time.monotonic() - self.last < self.interval_s:
            return
        self.last = time.monotonic()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._running = loop.run_in_executor(None, self._trim)
        self._running.add_done_callback(self._done)

    def _trim(self) -> None:
        self.trim(0)

    def _done(self, future: asyncio.Future) -> None:
        self._running = None
        self.trims += 1
        if not future.cancelled() and future.exception() is not None:
            log.warning("could not give freed memory back", exc_info=future.exception())


trimmer = HeapTrimmer()
