"""The box's timeline: every part records what happened through ``record``."""

from __future__ import annotations

import logging

from monitor.models import Event

log = logging.getLogger(__name__)


def record(
    kind: str, message: str, *, level: str = Event.Level.INFO, profile: str = "", node: str = "", **details
) -> Event:
    """Store one event (and log it); callable from views, tasks and the supervisor alike. ``node``: the
    inference node it happened on, where that matters."""
    log.log(logging.WARNING if level != Event.Level.INFO else logging.INFO, "%s: %s", kind, message)
    return Event.objects.create(
        kind=kind, level=level, profile=profile, node=node, message=str(message)[:4000], details=details
    )
