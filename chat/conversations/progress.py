"""Running answers' text so far, written to the database by one thread of the web process.

A streaming answer's stored text follows what its pages show at most CHAT_SAVE_INTERVAL_S behind
(a web process that dies keeps that much). The event loop only puts the newest text in a dict (a
lock held for that alone, never during a write) and the process's one writer thread saves it
(``services.save_progress``): a hop to Django's database thread for each save cost more CPU than
the save itself (docs/performance.md).

``settle(message_id)``, called just before an answer's final write (in a database thread), drops
a save not yet written and waits for one being written, so text so far never lands after the
final text. A save that fails is logged and dropped: the next one, or the final write, carries
the text.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import close_old_connections

from chat.conversations.services import save_progress

log = logging.getLogger(__name__)
Save = Callable[[int, str, str], None]


class ProgressWriter:
    """Saves ``(message_id, content, reasoning)`` in a thread of its own, newest text first, each
    message's latest text once (puts that come while it writes replace each other)."""

    def __init__(self, save: Save):
        self._save = save
        self._changed = threading.Condition()
        self._due: dict[int, tuple[str, str]] = {}
        self._writing: int | None = None  # the message whose text is being written
        self._thread: threading.Thread | None = None

    def put(self, message_id: int, content: str, reasoning: str) -> None:
        """Save this text of ``message_id`` soon (from the event loop: it never waits on a write)."""
        with self._changed:
            self._due[message_id] = (content, reasoning)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="answer-progress", daemon=True)
                self._thread.start()
            self._changed.notify()

    def settle(self, message_id: int) -> None:
        """Drop ``message_id``'s save not yet written and wait for one being written (blocking: call it
        from a database thread, before the answer's final write)."""
        with self._changed:
            self._due.pop(message_id, None)
            while self._writing == message_id:
                self._changed.wait()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due:
                    self._changed.wait()
                message_id, (content, reasoning) = self._due.popitem()
                self._writing = message_id
            try:
                close_old_connections()  # a connection the database dropped is not used again
                self._save(message_id, content, reasoning)
            except Exception:
                log.warning("could not save the text so far of answer %s", message_id, exc_info=True)
            finally:
                close_old_connections()  # as after a request: none kept open while idle (CONN_MAX_AGE)
                with self._changed:
                    self._writing = None
                    self._changed.notify_all()


writer = ProgressWriter(save_progress)
