"""The watchdog: are the profiles that should serve on this node loaded, is it restart time?

It runs in each node's llama-server supervisor, from the heartbeat, every ``WATCHDOG_INTERVAL_S``
(0: never), and reads the model list the heartbeat's beat has just asked the router for: it makes no
request of its own. The supervisor restarts a router that exits, the heartbeat one that stops
answering (``ROUTER_FAILURES`` beats); the watchdog covers a model instance that died inside a
router that still runs (killed, crashed, out of memory), and the optional daily restart.

A reload runs in a thread of its own (one at a time), so a load that takes minutes never holds up
the beats that keep the node's other profiles in their pools.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone
from django.utils.translation import gettext as _

from monitor import timeline
from monitor.llama.client import run_with_client
from monitor.models import Event, ServerProfile
from monitor.profiles.errors import LoadFailed
from monitor.profiles.loading import ensure_serving
from monitor.profiles.presets import live_id
from monitor.profiles.selectors import startup_placements

log = logging.getLogger(__name__)
RETRY_AFTER_FAILURE_S = 300


def daily_restart_due(now: dt.datetime, at: str, last_done: str | None) -> bool:
    """True once a day, at the first check after ``at`` ("HH:MM", server time)."""
    try:
        hour, minute = (int(part) for part in at.split(":"))
    except ValueError:
        return False
    today = now.date().isoformat()
    return (now.hour, now.minute) >= (hour, minute) and last_done != today


def _failed_recently(name: str) -> bool:
    """A profile that failed to load in the last few minutes is not retried every check."""
    since = timezone.now() - dt.timedelta(seconds=RETRY_AFTER_FAILURE_S)
    return Event.objects.filter(profile=name, kind=Event.Kind.PROFILE_FAILED, created_at__gte=since).exists()


def died(models: list[dict]) -> list[tuple[ServerProfile, dict]]:
    """The startup profiles (the default, those loaded on start) whose live instance on this node
    died, with its status, from the router's model list."""
    statuses = {model.get("id"): model.get("status") or {} for model in models}
    dead = []
    for placement in startup_placements():
        status = statuses.get(live_id(placement.profile, placement), {})
        if status.get("value") == "unloaded" and status.get("failed"):
            dead.append((placement.profile, status))
    return dead


class Watchdog:
    """Kept by the heartbeat; ``look`` runs in the heartbeat's thread, after a beat that reached the router."""

    def __init__(self, ask_restart: Callable[[str], None]):
        self.ask_restart = ask_restart
        self.interval_s = float(settings.WATCHDOG_INTERVAL_S)
        self.next_at = time.monotonic() + self.interval_s
        # The date of the last daily restart: a supervisor started after the day's time has just started
        # (or kept) its router, which counts as that day's restart.
        now = timezone.localtime()
        at = settings.LLAMA_DAILY_RESTART
        self.daily_done = now.date().isoformat() if at and daily_restart_due(now, at, None) else None
        self.reloading: threading.Thread | None = None

    def due(self) -> bool:
        return self.interval_s > 0 and time.monotonic() >= self.next_at

    def look(self, models: list[dict]) -> list[str]:
        """What it found and did, as notes (logged when not "ok"); a reload starts in its thread."""
        self.next_at = time.monotonic() + self.interval_s
        notes: list[str] = []
        if self.reloading is not None and self.reloading.is_alive():
            notes.append("a reload is under way")
        else:
            dead = []
            for profile, status in died(models):
                if _failed_recently(profile.name):
                    notes.append(f"{profile.name} failed to load lately; not retried yet")
                else:
                    dead.append((profile, status))
            if dead:
                notes += [f"reloading {profile.name}" for profile, _status in dead]
                self.reloading = threading.Thread(target=reload_all, args=(dead,), name="watchdog", daemon=True)
                self.reloading.start()
        if settings.LLAMA_DAILY_RESTART:
            now = timezone.localtime()
            if daily_restart_due(now, settings.LLAMA_DAILY_RESTART, self.daily_done):
                self.daily_done = now.date().isoformat()
                self.ask_restart(_("daily restart at %(at)s") % {"at": settings.LLAMA_DAILY_RESTART})
                notes.append("daily restart")
        for note in notes:
            log.info("watchdog: %s", note)
        return notes or ["ok"]


def reload_all(dead: list[tuple[ServerProfile, dict]]) -> list[str]:
    """Record each death on the timeline and load the profile again; what happened, one note each."""
    notes = []
    try:
        for profile, status in dead:
            # It was started and died (killed, crashed, out of memory): bring it back.
            timeline.record(
                Event.Kind.SERVER_RESTARTED,
                _("%(name)s stopped (exit code %(code)s); the watchdog loads it again.")
                % {"name": profile.name, "code": status.get("exit_code")},
                level=Event.Level.WARNING,
                profile=profile.name,
            )
            try:
                run_with_client(lambda client, profile=profile: ensure_serving(profile, client))
                notes.append(f"reloaded {profile.name}")
            except LoadFailed as error:
                notes.append(f"reload of {profile.name} failed: {error}")
            log.info("watchdog: %s", notes[-1])
    except Exception:  # the database or the router away a moment: the next look tries again
        log.warning("the watchdog's reload failed", exc_info=True)
    finally:
        close_old_connections()
    return notes
