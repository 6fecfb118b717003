"""Health of every part of the box, checked on request: database, Redis, each Celery
worker, beat, the sampler and the llama-server router with its loaded profiles.

All checks run at once, each with a short timeout, so a part that hangs (a stopped
process, a full disk) is reported as down within ``HEALTH_TIMEOUT_S`` instead of
holding up the answer. Beat proves it ticks through the watchdog's check, which it schedules
every ``WATCHDOG_INTERVAL_S`` and which stamps a heartbeat first; the sampler
through the time of its newest live sample. Used by ``/healthz`` (ok or not, no
detail), the staff health page and ``manage.py health``.
"""

from __future__ import annotations

import asyncio
import functools
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass

import orjson
import redis
from celery import current_app
from django.conf import settings
from django.db import connection
from django.utils.translation import gettext as _

from monitor.nodes.registry import placements_here
from monitor.profiles.clients import local_server_client
from monitor.profiles.presets import live_id
from monitor.telemetry.sampler import LIVE_KEY

BEAT_KEY = "qwenweb:health:beat"
WATCHDOG_WORKER_PREFIX = "watchdog@"
DOCUMENTS_WORKER_PREFIX = "documents@"


@dataclass
class Part:
    """One part's state; ``detail`` is for staff only (never on /healthz)."""

    name: str
    ok: bool
    detail: str


def _redis() -> redis.Redis:
    return _client(settings.REDIS_URL, settings.HEALTH_TIMEOUT_S)


@functools.cache
def _client(url: str, timeout: float) -> redis.Redis:
    """Kept for the process: each check (and each watchdog run's heartbeat) reuses its connection."""
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)


def record_beat_tick() -> None:
    """Beat's heartbeat (stamped by the watchdog task it schedules): the time it last ran."""
    _redis().set(BEAT_KEY, str(time.time()), ex=3600)


def _age_text(seconds: float) -> str:
    return _("last %(seconds)d s ago") % {"seconds": round(seconds)}


def check_database() -> list[Part]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return [Part("database", True, connection.vendor)]
    finally:
        connection.close()  # this thread's connection: not left open in the pool


def check_redis() -> list[Part]:
    _redis().ping()
    return [Part("redis", True, "PONG")]


def check_workers() -> list[Part]:
    """The default worker, the documents' and the watchdog's, by the hostnames that answer a ping."""
    replies = current_app.control.ping(timeout=settings.HEALTH_TIMEOUT_S * 0.6) or []
    hosts = sorted(host for reply in replies for host in reply)
    watchdog = [host for host in hosts if host.startswith(WATCHDOG_WORKER_PREFIX)]
    documents = [host for host in hosts if host.startswith(DOCUMENTS_WORKER_PREFIX)]
    default = [host for host in hosts if host not in watchdog and host not in documents]
    silent = _("no answer to a ping")
    return [
        Part("worker", bool(default), ", ".join(default) or silent),
        Part("documents worker", bool(documents), ", ".join(documents) or silent),
        Part("watchdog worker", bool(watchdog), ", ".join(watchdog) or silent),
    ]


def _fresh(name: str, stamp: float | None, limit_s: float) -> Part:
    if stamp is None:
        return Part(name, False, _("never seen"))
    age = max(0.0, time.time() - stamp)
    return Part(name, age <= limit_s, _age_text(age))


def check_beat() -> list[Part]:
    stamp = _redis().get(BEAT_KEY)
    return [_fresh("beat", float(stamp) if stamp else None, settings.WATCHDOG_INTERVAL_S * 2.5)]


def check_sampler() -> list[Part]:
    newest = _redis().lindex(LIVE_KEY, 0)
    stamp = orjson.loads(newest).get("t") if newest else None
    # Every idle interval while no dashboard is open (sampler.WATCHED_KEY).
    interval = max(settings.MONITOR_SAMPLE_INTERVAL_S, settings.MONITOR_IDLE_SAMPLE_INTERVAL_S)
    return [_fresh("sampler", stamp, max(interval * 3, 3.0))]


def check_llama() -> list[Part]:
    """The router answers its model list; which profiles it has loaded."""

    async def listing() -> list[dict]:
        client = local_server_client()
        try:
            return await client.list_models()
        finally:
            await client.aclose()

    try:
        # Bounded here too: a hung router must not keep this thread for the client's long read timeout.
        models = asyncio.run(asyncio.wait_for(listing(), settings.HEALTH_TIMEOUT_S))
        loaded = {m.get("id") for m in models if (m.get("status") or {}).get("value") == "loaded"}
        local = list(placements_here())
    finally:
        connection.close()
    names = [p.profile.name for p in local if live_id(p.profile, p) in loaded]
    detail = ", ".join(names) if names else _("no profile loaded")
    return [Part("llama-server", True, detail), Part("profiles", bool(names), detail)]


CHECKS = {
    "database": check_database,
    "redis": check_redis,
    "worker": check_workers,
    "beat": check_beat,
    "sampler": check_sampler,
    "llama-server": check_llama,
}


def check_all() -> list[Part]:
    """Every check at once; a check that raises or overruns marks its part down."""
    timeout = settings.HEALTH_TIMEOUT_S
    pool = ThreadPoolExecutor(max_workers=len(CHECKS), thread_name_prefix="health")
    futures = {name: pool.submit(check) for name, check in CHECKS.items()}
    deadline = time.monotonic() + timeout
    parts: list[Part] = []
    for name, future in futures.items():
        try:
            parts += future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            parts.append(Part(name, False, _("no answer within %(seconds)s s") % {"seconds": timeout}))
        except Exception as error:
            parts.append(Part(name, False, f"{type(error).__name__}: {error}"[:300]))
    pool.shutdown(wait=False, cancel_futures=True)  # a hung check is left behind, not waited for
    return parts


def report() -> dict:
    """The staff view's data: overall ok and each part."""
    parts = check_all()
    return {"ok": all(part.ok for part in parts), "parts": [asdict(part) for part in parts]}


_verdict: tuple[float, bool] | None = None


def healthy() -> bool:
    """Every part ok; reused for a second, so that a busy ``/healthz`` poller costs one check a second."""
    global _verdict
    now = time.monotonic()
    if _verdict is None or now - _verdict[0] > 1.0:
        _verdict = (now, all(part.ok for part in check_all()))
    return _verdict[1]
