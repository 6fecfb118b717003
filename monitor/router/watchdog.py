"""The watchdog: is llama-server answering, are the profiles that should serve loaded, is it restart time?

Run every few seconds by Celery beat on the main box, and on each joined node that is up by its own
worker (``monitor.tasks.node_watchdog``, sent to its queue): each checks its own router, with counters of
its own in Redis. The supervisor restarts a router that exits;
the watchdog covers what a process manager cannot see: a router that still runs but
no longer answers, a model instance that died inside it, and the optional daily restart.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging

import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from monitor import timeline
from monitor.llama.client import LlamaClient, run_with_client
from monitor.llama.errors import LlamaError
from monitor.models import Event
from monitor.profiles.errors import LoadFailed
from monitor.profiles.loading import ensure_serving
from monitor.profiles.presets import live_id
from monitor.profiles.selectors import startup_placements
from monitor.profiles.status import router_status
from monitor.router.supervisor import request_restart

log = logging.getLogger(__name__)
FAILURES_KEY = "qwenweb:watchdog:failures:{node}"
DAILY_KEY = "qwenweb:watchdog:daily:{node}"
FAILURES_BEFORE_RESTART = 2
RETRY_AFTER_FAILURE_S = 300


def _redis() -> redis.Redis:
    return _client(settings.REDIS_URL)


@functools.cache
def _client(url: str) -> redis.Redis:
    """Kept for the worker's life: a check every few seconds reuses one connection."""
    return redis.Redis.from_url(url, socket_timeout=5)


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


async def _check(client: LlamaClient) -> list[str]:
    notes: list[str] = []
    store = _redis()
    try:
        statuses = await router_status(client, fresh=True)
    except LlamaError:
        failures_key = FAILURES_KEY.format(node=settings.NODE_NAME)
        failures = store.incr(failures_key)
        store.expire(failures_key, 3600)
        if failures % FAILURES_BEFORE_RESTART == 0:  # every second failed check, for as long as it lasts
            reason = ngettext(
                "llama-server did not answer %(n)d check in a row.",
                "llama-server did not answer %(n)d checks in a row.",
                failures,
            ) % {"n": failures}
            if request_restart(reason):
                notes.append("restart requested")
            else:
                await sync_to_async(timeline.record)(
                    Event.Kind.SERVER_DOWN,
                    _("llama-server is not answering and no supervisor is running to restart it."),
                    level=Event.Level.ERROR,
                )
                notes.append("down, no supervisor")
        return notes or ["unreachable"]
    store.delete(FAILURES_KEY.format(node=settings.NODE_NAME))
    for placement in await sync_to_async(startup_placements)():
        profile = placement.profile
        status = statuses.get(live_id(profile, placement), {})
        if status.get("value") == "unloaded" and status.get("failed"):
            if await sync_to_async(_failed_recently)(profile.name):
                notes.append(f"{profile.name} failed to load lately; not retried yet")
                continue
            # It was started and died (killed, crashed, out of memory): bring it back.
            await sync_to_async(timeline.record)(
                Event.Kind.SERVER_RESTARTED,
                _("%(name)s stopped (exit code %(code)s); the watchdog loads it again.")
                % {"name": profile.name, "code": status.get("exit_code")},
                level=Event.Level.WARNING,
                profile=profile.name,
            )
            try:
                await ensure_serving(profile, client)
                notes.append(f"reloaded {profile.name}")
            except LoadFailed as error:
                notes.append(f"reload of {profile.name} failed: {error}")
    if settings.LLAMA_DAILY_RESTART:
        now = timezone.localtime()
        daily_key = DAILY_KEY.format(node=settings.NODE_NAME)
        last = store.get(daily_key)
        if daily_restart_due(now, settings.LLAMA_DAILY_RESTART, last.decode() if last else None):
            store.set(daily_key, now.date().isoformat())
            if request_restart(_("daily restart at %(at)s") % {"at": settings.LLAMA_DAILY_RESTART}):
                notes.append("daily restart")
    return notes or ["ok"]


def run_watchdog() -> list[str]:
    return run_with_client(_check, timeout=10)
