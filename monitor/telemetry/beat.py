"""Celery beat's scheduler: beat's own, stamping beat's heartbeat for the health checks as it runs.

Set as ``CELERY_BEAT_SCHEDULER`` (Celery's documented ``beat_scheduler``); ``CELERY_BEAT_MAX_LOOP_INTERVAL``
(``BEAT_STAMP_S``) makes beat wake at least that often, so the stamp stays fresh between its tasks.
The stamp proves beat itself runs, whatever its workers are busy with (a download, a summary).
"""

from __future__ import annotations

import logging
import time

import redis
from celery.beat import PersistentScheduler

log = logging.getLogger(__name__)
STAMP_EVERY_S = 1.0  # a tick per due task: those that come together are stamped once


class StampingScheduler(PersistentScheduler):
    """``PersistentScheduler`` (the default: the schedule kept in beat's ``--schedule`` file) whose
    every tick stamps beat's heartbeat (``monitor.telemetry.health.record_beat_tick``)."""

    stamped_at = 0.0

    def tick(self, *args, **kwargs):
        if time.monotonic() - self.stamped_at >= STAMP_EVERY_S:
            from monitor.telemetry.health import record_beat_tick  # beat loads its scheduler before Django

            try:
                record_beat_tick()
                self.stamped_at = time.monotonic()
            except redis.RedisError:  # the health checks will say beat is late; the schedule still runs
                log.warning("could not stamp beat's heartbeat", exc_info=True)
        return super().tick(*args, **kwargs)
