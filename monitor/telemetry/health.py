"""Health of every part of the box, checked on request: database, Redis, each Celery
worker, beat, the sampler, the main box's llama-server router, the profiles people may use and
every inference node.

All checks run at once, each with a short timeout, so a part that hangs (a stopped
process, a full disk) is reported as down within ``HEALTH_TIMEOUT_S`` instead of
holding up the answer. Beat proves it ticks through the heartbeat its scheduler stamps at least
every ``BEAT_STAMP_S`` (``monitor.telemetry.beat``); the sampler through the time of its newest live
sample. Used by ``/healthz`` (ok or not, no
detail), the staff health page and ``manage.py health``.

The verdict (``/healthz``) counts the required parts only: the app's own (database, Redis, the
workers, beat, the main box's sampler), the main box's router where it serves a profile, and
"profiles": at least one profile loaded on a node that answers, and every profile people may use
placed on at least one node that answers. Each node is a part too ("node NAME": its heartbeat, what
it serves), shown but not required: a second box that goes down while the profiles people use are
still served elsewhere leaves the box ok (degraded), not down. See docs/dashboard.md.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import closing
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import orjson
import redis
from celery import current_app
from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext as _

from monitor.llama.client import local_client
from monitor.models import Placement
from monitor.nodes.registry import placements_here
from monitor.profiles.presets import live_id
from monitor.redis_clients import sync_client
from monitor.telemetry.live import live_key
from monitor.telemetry.node_status import Beat, add_live_reads, live_from, main_node, node_rows, node_views

BEAT_KEY = "qwenweb:health:beat"
DOCUMENTS_WORKER_PREFIX = "documents@"


@dataclass
class Part:
    """One part's state; ``detail`` is for staff only (never on /healthz)."""

    name: str
    ok: bool
    detail: str
    required: bool = True  # counts for the verdict (/healthz); a node's own part does not


def _redis() -> redis.Redis:
    """Kept for the process: each check (and each of beat's stamps) reuses its connection."""
    return sync_client(timeout_s=settings.HEALTH_TIMEOUT_S)


def record_beat_tick() -> None:
    """Beat's heartbeat (stamped by its scheduler, ``monitor.telemetry.beat``): the time it last ran."""
    _redis().set(BEAT_KEY, str(time.time()), ex=3600)


def check_database() -> list[Part]:
    with closing(connection), connection.cursor() as cursor:  # this thread's connection: not left open in the pool
        cursor.execute("SELECT 1")
        return [Part("database", True, connection.vendor)]


def check_redis() -> list[Part]:
    _redis().ping()
    return [Part("redis", True, "PONG")]


def check_workers() -> list[Part]:
    """The default worker and the documents', by the hostnames that answer a ping."""
    replies = current_app.control.ping(timeout=settings.HEALTH_TIMEOUT_S * 0.6) or []
    hosts = sorted(host for reply in replies for host in reply)
    documents = [host for host in hosts if host.startswith(DOCUMENTS_WORKER_PREFIX)]
    default = [host for host in hosts if host not in documents]
    silent = _("no answer to a ping")
    return [
        Part("worker", bool(default), ", ".join(default) or silent),
        Part("documents worker", bool(documents), ", ".join(documents) or silent),
    ]


def _fresh(name: str, stamp: float | None, limit_s: float) -> Part:
    if stamp is None:
        return Part(name, False, _("never seen"))
    age = max(0.0, time.time() - stamp)
    return Part(name, age <= limit_s, _("last %(seconds)d s ago") % {"seconds": round(age)})


def check_beat() -> list[Part]:
    stamp = _redis().get(BEAT_KEY)
    return [_fresh("beat", float(stamp) if stamp else None, settings.BEAT_STAMP_S * 2.5)]


def check_sampler() -> list[Part]:
    """The main box's sampler (every other node's is in its node's part)."""
    with closing(connection):
        main = main_node()
    newest = _redis().lindex(live_key(main), 0)
    stamp = orjson.loads(newest).get("t") if newest else None
    # Every idle interval while no dashboard is open (sampler.WATCHED_KEY).
    interval = max(settings.MONITOR_SAMPLE_INTERVAL_S, settings.MONITOR_IDLE_SAMPLE_INTERVAL_S)
    return [_fresh("sampler", stamp, max(interval * 3, 3.0))]


def check_llama() -> list[Part]:
    """The main box's router answers its model list; which profiles it has loaded. Required where the
    main box serves a profile (a box that is only the front of other nodes need not)."""
    with closing(connection):
        required = Placement.objects.filter(node__name=main_node()).exists()
        local = list(placements_here())
    wait_s = round(settings.HEALTH_TIMEOUT_S * 0.8, 2)  # within check_all's own limit: the part keeps `required`
    try:
        # Bounded here too: a hung router must not keep this thread for the client's long read timeout.
        models = asyncio.run(asyncio.wait_for(local_client().list_models(), wait_s))
    except TimeoutError:
        return [Part("llama-server", False, _("no answer within %(seconds)s s") % {"seconds": wait_s}, required)]
    except Exception as error:
        return [_failed("llama-server", error, required)]
    loaded = {m.get("id") for m in models if (m.get("status") or {}).get("value") == "loaded"}
    names = [p.profile.name for p in local if live_id(p.profile, p) in loaded]
    return [Part("llama-server", True, ", ".join(names) if names else _("no profile loaded"), required)]


def check_nodes() -> list[Part]:
    """The "profiles" part (what people may use is served somewhere) and a part per node, from the heartbeats."""
    with closing(connection):
        nodes = node_rows()
        placed = list(
            Placement.objects.filter(profile__available_to_users=True, profile__remote_url="").values_list(
                "profile__name", "node__name"
            )
        )
    names = [node["name"] for node in nodes]
    pipe = _redis().pipeline(transaction=False)
    add_live_reads(pipe, names)
    samples, beats, states = live_from(names, pipe.execute())
    views = node_views(nodes, beats, states, samples, time.time())
    return [_profiles_part(placed, beats), *(_node_part(view) for view in views)]


def _profiles_part(placed: list[tuple[str, str]], beats: dict[str, Beat]) -> Part:
    """At least one profile loaded on a node that answers, and none that people may use left with no
    node that answers among the nodes it is placed on (there it could not even be loaded)."""
    answering = {name for name, beat in beats.items() if beat.up and beat.router}
    loaded: dict[str, list[str]] = {}
    for name in sorted(answering):
        for profile in beats[name].serving:
            loaded.setdefault(profile, []).append(name)
    reachable = {profile for profile, node in placed if node in answering}
    lost = sorted({profile for profile, _node in placed} - reachable)
    details = [
        _("%(profile)s on %(nodes)s") % {"profile": profile, "nodes": ", ".join(nodes)}
        for profile, nodes in sorted(loaded.items())
    ] or [_("no profile loaded")]
    if lost:
        details.append(_("no node that answers can serve %(names)s") % {"names": ", ".join(lost)})
    return Part("profiles", bool(loaded) and not lost, "; ".join(details))


def _node_part(view: dict) -> Part:
    """A node: its heartbeat and what it serves, or since when it is silent; never required by itself."""
    name = f"node {view['name']}"
    if not view["up"]:
        if view["silent_s"] is None:
            return Part(name, False, _("no heartbeat seen yet"), required=False)
        detail = _("no heartbeat for %(seconds).0f s") % {"seconds": view["silent_s"]}
        if view["down_since"] is not None:
            at = timezone.localtime(datetime.fromtimestamp(view["down_since"], tz=UTC))
            detail += "; " + _("down since %(at)s") % {"at": at.strftime("%Y-%m-%d %H:%M:%S")}
        return Part(name, False, detail, required=False)
    details = [_("last heartbeat %(seconds).0f s ago") % {"seconds": view["beat_age_s"] or 0}]
    if not view["router"]:
        details.append(_("llama-server is not answering"))
    served = ", ".join(entry["profile"] for entry in view["serving"]) or _("nothing loaded")
    details.append(_("serving: %(what)s") % {"what": served})
    if view["sample_age_s"] is None:
        details.append(_("no figures from its sampler"))
    return Part(name, view["router"], "; ".join(details), required=False)


CHECKS = {
    "database": check_database,
    "redis": check_redis,
    "worker": check_workers,
    "beat": check_beat,
    "sampler": check_sampler,
    "llama-server": check_llama,
    "nodes": check_nodes,
}


def _failed(name: str, error: Exception, required: bool = True) -> Part:
    return Part(name, False, f"{type(error).__name__}: {error}"[:300], required)


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
            parts.append(_failed(name, error))
    pool.shutdown(wait=False, cancel_futures=True)  # a hung check is left behind, not waited for
    return parts


def verdict(parts: list[Part]) -> bool:
    """Ok: every required part is (a node that is down, with what people use served elsewhere, is not)."""
    return all(part.ok for part in parts if part.required)


def report() -> dict:
    """The staff view's data: the verdict, whether parts that are not required are down, and each part."""
    parts = check_all()
    ok = verdict(parts)
    return {"ok": ok, "degraded": ok and not all(part.ok for part in parts), "parts": [asdict(part) for part in parts]}


_verdict: tuple[float, bool] | None = None


def healthy() -> bool:
    """Every part ok; reused for a second, so that a busy ``/healthz`` poller costs one check a second."""
    global _verdict
    now = time.monotonic()
    if _verdict is None or now - _verdict[0] > 1.0:
        _verdict = (now, verdict(check_all()))
    return _verdict[1]
