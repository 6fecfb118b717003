"""Process restarts on the timeline: supervisord's state events, read as its event listener.

`make run` runs every part under supervisord; ``manage.py supervisor_events`` is the
listener it feeds PROCESS_STATE_* events to. A part that exits, comes back, keeps dying
at start (back-off) or is given up on (fatal) becomes one timeline event. Supervisord's
first start of each part is not news and is not recorded.
"""

from __future__ import annotations

import logging
from typing import TextIO

from django.utils.translation import gettext_lazy
from supervisor import childutils

from monitor import timeline
from monitor.models import Event

log = logging.getLogger(__name__)

# Parts not worth a timeline entry: the one-shot ready announcement and this listener.
QUIET_PROGRAMS = frozenset({"ready", "events"})
# Per supervisord event recorded: the timeline kind, its level and the message (fields: the event's).
MESSAGES = {
    "PROCESS_STATE_EXITED": (
        Event.Kind.PROCESS_EXITED,
        Event.Level.WARNING,
        gettext_lazy("%(processname)s exited (pid %(pid)s); supervisord starts it again."),
    ),
    "PROCESS_STATE_BACKOFF": (
        Event.Kind.PROCESS_EXITED,
        Event.Level.WARNING,
        gettext_lazy("%(processname)s stopped again just after starting (try %(tries)s); retrying with back-off."),
    ),
    "PROCESS_STATE_FATAL": (
        Event.Kind.PROCESS_FATAL,
        Event.Level.ERROR,
        gettext_lazy("%(processname)s keeps failing to start; supervisord gave up. See var/log/%(processname)s.log."),
    ),
    "PROCESS_STATE_RUNNING": (
        Event.Kind.PROCESS_RESTARTED,
        Event.Level.INFO,
        gettext_lazy("%(processname)s is running again (pid %(pid)s)."),
    ),
}


class ProcessEvents:
    """Turns one supervisord event after another into timeline events."""

    def __init__(self) -> None:
        self.exited: set[str] = set()

    def handle(self, event: str, payload: str) -> Event | None:
        fields = {"pid": "?", "tries": "?", **childutils.get_headers(payload.strip())}
        name = fields.get("processname", "")
        if not name or name in QUIET_PROGRAMS or event not in MESSAGES:
            return None
        if event == "PROCESS_STATE_RUNNING":
            if name not in self.exited:  # a first start is not news
                return None
            self.exited.discard(name)
        elif event != "PROCESS_STATE_FATAL":
            self.exited.add(name)
        kind, level, message = MESSAGES[event]
        return timeline.record(kind, message % fields, level=level, process=name)


def listen(stdin: TextIO, stdout: TextIO) -> None:
    """Supervisord's event-listener protocol, forever: READY, one event, OK. A failure to
    record is logged and acknowledged anyway, so supervisord never stalls on this listener."""
    events = ProcessEvents()
    while True:
        headers, payload = childutils.listener.wait(stdin, stdout)
        try:
            events.handle(headers.get("eventname", ""), payload)
        except Exception:
            log.exception("could not record supervisord event %s", headers.get("eventname"))
        childutils.listener.ok(stdout)
