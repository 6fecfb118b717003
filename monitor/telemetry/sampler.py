"""The dashboard's sampler: GPU (NVML), host (psutil) and llama-server (/metrics, /slots).

One long-lived process per node (``manage.py run_sampler``, with the node's QWENWEB_NODE_NAME)
samples its own box: its GPUs, its host and the profiles its own llama-server router serves (the
main box's also reads the remote profiles' servers). It keeps the last minutes in Redis under its
node's key (``live_key``) for the live charts and the node's card, and writes one mean row per
minute, carrying its node, for the 24-hour history. Each source is read on its own with a short
timeout: one that is down, missing or slow is marked stale in that sample and the rest still
arrive. The main box's sampler also checks every node's heartbeat (``node_status.NodeWatch``).

``manage.py run_sampler --once`` prints one sample as JSON (the NVML check on a GPU box).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import orjson
import psutil
import redis.asyncio as aioredis
from asgiref.sync import sync_to_async
from django.conf import settings

from monitor.llama.client import LlamaClient, local_client
from monitor.llama.errors import LlamaError
from monitor.models import MetricMinute, Node, Placement, ServerProfile
from monitor.nodes.registry import placements_here
from monitor.profiles.clients import profile_client
from monitor.profiles.presets import live_id
from monitor.telemetry.figures import (
    LLAMA_COUNTERS,
    LLAMA_GAUGES,
    MinuteAverager,
    draft_figures,
    flatten,
    host_figures,
    parse_llama_metrics,
    slot_figures,
)
from monitor.telemetry.gpu import NvmlSampler
from monitor.telemetry.live import WATCHED_KEY, live_key, wake_key
from monitor.telemetry.node_status import NodeWatch

log = logging.getLogger(__name__)


IDLE_SLOTS_EVERY_S = 10.0


@dataclass
class Target:
    """One llama-server (or one model id on the local router) to read figures from."""

    profile: str
    client: LlamaClient


# What seldom changes (the nodes, the remote profiles) is read again with the targets while a dashboard
# is open, and every SELDOM_EVERY_IDLE_S while none is: the idle sampler reads the database no more
# often than it did before there were nodes (bench/sampler_bench.py).
SELDOM_EVERY_IDLE_S = 60.0


@dataclass
class Here:
    """What this node's sampler reads from the database now and then."""

    local: list[Placement]  # the profiles this node serves, the default first
    remote: list[ServerProfile] | None  # the remote profiles' servers: the main box's sampler only (None: not read)
    nodes: list[str] | None  # every node (the main box's sampler checks their heartbeats), empty elsewhere


def _here(seldom: bool) -> Here:
    local = sorted(placements_here(), key=lambda placement: not placement.profile.is_default)
    if not seldom:
        return Here(local, None, None)
    nodes = list(Node.objects.values_list("name", "is_local"))
    main = next((name for name, is_local in nodes if is_local), None)
    if main not in (None, settings.NODE_NAME):  # a joined box: its own router only
        return Here(local, [], [])
    return Here(local, list(ServerProfile.objects.exclude(remote_url="")), [name for name, _local in nodes])


async def find_targets(timeout_s: float, here: Here) -> list[Target]:
    """Every server worth reading: on the main box each remote profile, and on this node's router the
    profiles it has loaded (router mode) or the default one (a single-model server).
    Never names an unloaded router model, which would make the router load it."""
    local, remote = here.local, here.remote or []
    targets = [Target(p.name, profile_client(p, None)) for p in remote]
    if not local:
        return [Target("default", local_client()), *targets]
    try:
        listing = await asyncio.wait_for(local_client().get_json("/models"), timeout_s)
        entries = listing.get("data") or []
    except (LlamaError, TimeoutError, ValueError, AttributeError):
        entries = []
    if any(isinstance(entry.get("status"), dict) for entry in entries):  # router mode
        loaded = {e.get("id") for e in entries if (e.get("status") or {}).get("value") == "loaded"}
        served = [p for p in local if live_id(p.profile, p) in loaded]
        return [Target(p.profile.name, profile_client(p.profile, p)) for p in served] + targets
    return [Target(local[0].profile.name, profile_client(local[0].profile, local[0])), *targets]


class Sampler:
    """Reads every source once per ``sample()``; keeps what it needs to turn counters into rates."""

    def __init__(self, *, source_timeout_s: float = 0.8, targets_every_s: float = 15.0):
        self.nvml = NvmlSampler()
        self.node = settings.NODE_NAME
        self.source_timeout_s = source_timeout_s
        self.targets_every_s = targets_every_s
        self.nodes: list[str] = []  # every node, on the main box (see Here)
        self.remote: list[ServerProfile] = []
        self.watched = True  # a dashboard is open (run_forever says): the seldom parts are read with the rest
        self._seldom_at = -1e9
        self._targets: list[Target] = []
        self._targets_at = -1e9
        self._counters: dict[str, tuple[float, dict[str, float]]] = {}
        self._idle_slots: dict[str, tuple[float, list]] = {}
        psutil.cpu_percent(interval=None)  # the first call only starts the measurement

    async def _server(self, target: Target, now: float) -> dict:
        figures: dict = {"profile": target.profile, "ok": False, "error": ""}
        try:
            text, slots = await asyncio.wait_for(self._read(target, now), self.source_timeout_s)
        except TimeoutError:
            figures["error"] = "timeout"
            return figures
        except Exception as error:  # LlamaError; a page that is not Prometheus text, JSON of another shape
            figures["error"] = str(error) or error.__class__.__name__
            return figures
        metrics = parse_llama_metrics(text)
        figures.update({name: metrics.get(name) for name in LLAMA_GAUGES.values()})
        figures["slots"] = slot_figures(slots if isinstance(slots, list) else [])
        figures["slots_busy"] = sum(1 for slot in figures["slots"] if slot["processing"])
        figures["slots_total"] = len(figures["slots"])
        figures.update(self._rates(target.profile, now, metrics, figures["slots"]))
        figures.update(draft_figures(metrics))
        total = sum(s["n_ctx"] for s in figures["slots"])
        figures["kv_used_pct"] = round(sum(s["used"] for s in figures["slots"]) * 100 / total, 1) if total else None
        figures["ok"] = True
        return figures

    async def _read(self, target: Target, now: float) -> tuple[str, list]:
        """/metrics, and /slots when something may have changed there: an idle server's slots
        stay as they were, so they are read again only every IDLE_SLOTS_EVERY_S."""
        text = await target.client.get_text("/metrics")
        cached = self._idle_slots.get(target.profile)
        busy = parse_llama_metrics(text).get("requests_processing", 1) > 0
        if not busy and cached and now - cached[0] < IDLE_SLOTS_EVERY_S:
            return text, cached[1]
        slots = await target.client.get_json("/slots")
        if busy:
            self._idle_slots.pop(target.profile, None)
        else:
            self._idle_slots[target.profile] = (now, slots)
        return text, slots

    def _rates(self, profile: str, now: float, metrics: dict[str, float], slots: list[dict]) -> dict:
        """Tokens per second of wall clock since the last sample: what the box does right now.

        llama-server adds a request's tokens to its counters only when the request ends,
        so generation also counts the tokens the busy slots decoded since the last sample:
        counter delta + (tokens decoded by busy slots now - then)."""
        counters = {name: metrics[name] for name in LLAMA_COUNTERS.values() if name in metrics}
        counters["decoding"] = sum(s["decoded"] for s in slots if s["processing"])
        previous = self._counters.get(profile)
        self._counters[profile] = (now, counters)
        rates = {"prompt_tps": None, "generation_tps": None}
        if previous is None or now <= previous[0]:
            return rates
        elapsed = now - previous[0]
        before = previous[1]
        if "prompt_tokens_total" in counters and "prompt_tokens_total" in before:
            delta = counters["prompt_tokens_total"] - before["prompt_tokens_total"]
            # A counter that went down belongs to a restarted server: count from zero.
            rates["prompt_tps"] = round((delta if delta >= 0 else counters["prompt_tokens_total"]) / elapsed, 2)
        if "generated_tokens_total" in counters and "generated_tokens_total" in before:
            delta = counters["generated_tokens_total"] - before["generated_tokens_total"]
            if delta < 0:
                delta = counters["generated_tokens_total"]
            tokens = delta + counters["decoding"] - before["decoding"]
            rates["generation_tps"] = round(max(tokens, 0) / elapsed, 2)
        return rates

    async def sample(self) -> dict:
        now = time.time()
        mono = time.monotonic()
        stale: list[str] = []
        if mono - self._targets_at >= self.targets_every_s:
            try:
                seldom = self.watched or mono - self._seldom_at >= SELDOM_EVERY_IDLE_S
                here = await sync_to_async(_here)(seldom)
                if here.remote is not None and here.nodes is not None:
                    self.remote, self.nodes, self._seldom_at = here.remote, here.nodes, mono
                self._targets = await find_targets(self.source_timeout_s, Here(here.local, self.remote, self.nodes))
                self._targets_at = mono
            except Exception as error:  # the database is busy or not migrated: keep the last list
                log.warning("could not list the servers to sample: %s", error)
                self._targets = self._targets or [Target("default", local_client())]
        gpus, gpu_reason = self.nvml.sample(mono)
        try:
            host = host_figures()
        except Exception as error:
            host, _ = {}, stale.append(f"host: {error}")
        servers = await asyncio.gather(*(self._server(t, now) for t in self._targets))
        stale += [f"llama-server {s['profile']}: {s['error']}" for s in servers if not s["ok"]]
        return {
            "t": round(now, 3),
            "node": self.node,
            "host": host,
            "gpu": {"available": bool(gpus), "reason": gpu_reason, "gpus": [asdict(g) for g in gpus]},
            "servers": list(servers),
            "stale": stale,
        }


def _save_minute(node: str, minute: int, values: dict[str, float]) -> None:
    MetricMinute.objects.create(node=node, at=datetime.fromtimestamp(minute, tz=UTC), values=values)


def live_points() -> int:
    """How many samples the live window (MONITOR_LIVE_SECONDS) holds."""
    return int(settings.MONITOR_LIVE_SECONDS / settings.MONITOR_SAMPLE_INTERVAL_S)


async def run_forever() -> None:
    """Sample until cancelled: every MONITOR_SAMPLE_INTERVAL_S while a dashboard is open, every
    MONITOR_IDLE_SAMPLE_INTERVAL_S while none is; on the main box, check every node's heartbeat every
    NODE_CHECK_S meanwhile."""
    interval_s = settings.MONITOR_SAMPLE_INTERVAL_S
    idle_interval_s = max(interval_s, settings.MONITOR_IDLE_SAMPLE_INTERVAL_S)
    keep = live_points()
    watched = True  # until the first sample says otherwise: a fresh start fills the charts' first seconds
    sampler = Sampler()
    node = sampler.node
    averager = MinuteAverager()
    redis = aioredis.Redis.from_url(settings.REDIS_URL)
    # Its own client for the idle wait: a BLPOP of an idle interval outlasts redis-py's default read
    # timeout (5 s), which would end it half-way, deaf to a dashboard that opens in the other half.
    waiter = aioredis.Redis.from_url(settings.REDIS_URL, socket_timeout=idle_interval_s + 5)
    watch = NodeWatch(redis)
    next_at = time.monotonic()
    try:
        while True:
            sample = await sampler.sample()
            values = flatten(sample)
            sample["values"] = values
            try:
                *_stored, watched = await (
                    redis.pipeline(transaction=False)
                    .lpush(live_key(node), orjson.dumps(sample))
                    .ltrim(live_key(node), 0, keep - 1)
                    .exists(WATCHED_KEY)
                    .execute()
                )
            except Exception:  # Redis restarting: the next sample tries again
                log.warning("could not store a sample", exc_info=True)
            finished = averager.add(sample["t"], values)
            if finished:
                try:
                    await sync_to_async(_save_minute)(node, *finished)
                except Exception:
                    log.warning("could not store a history row", exc_info=True)
            sampler.watched = watched
            watch.nodes = sampler.nodes
            next_at += interval_s if watched else idle_interval_s
            if next_at < time.monotonic():  # fell behind (a stall, a suspended machine): go on from now, no burst
                next_at = time.monotonic()
            next_at = await _pause(waiter, node, next_at, watched, watch)
    finally:
        sampler.nvml.close()
        await redis.aclose()
        await waiter.aclose()


async def _pause(waiter: aioredis.Redis, node: str, next_at: float, watched: bool, watch: NodeWatch) -> float:
    """Until the next sample is due at ``next_at`` (returned), or a dashboard opens (now, returned),
    checking the nodes' heartbeats whenever their check falls due meanwhile (the main box's sampler).

    While watched (a sample a second) a check runs beside a sample that comes within a second of it:
    no wake of its own. While idle it waits for a dashboard with one BLPOP for the whole interval, beside the checks'
    timer: a wake for a check costs a timer, not a BLPOP ended and sent again (bench/sampler_bench.py)."""
    woken = None if watched else asyncio.ensure_future(_woken(waiter, node, next_at - time.monotonic()))
    try:
        while True:
            now = time.monotonic()
            if watch.nodes and now >= watch.due:
                try:
                    await watch.check()
                except Exception:  # Redis or the database away a moment: the next check tries again
                    log.warning("could not check the nodes' heartbeats", exc_info=True)
                continue
            if woken is None:  # watched: the check goes with a sample that comes within a second of it
                until = watch.due if watch.nodes and watch.due + 1.0 < next_at else next_at
                if now < until:
                    await asyncio.sleep(until - now)
                if until == next_at:
                    return next_at
                continue
            check_first = bool(watch.nodes) and watch.due < next_at
            if not check_first or (await asyncio.wait({woken}, timeout=watch.due - now))[0]:
                # Its BLPOP ends the wait (never cancelled on the way: that would cost its connection).
                return time.monotonic() if await woken else next_at  # a dashboard opened: its figures at once
    finally:
        if woken is not None and not woken.done():
            woken.cancel()


async def _woken(redis: aioredis.Redis, node: str, wait_s: float) -> bool:
    """Wait ``wait_s``, or less when a dashboard opens (True then)."""
    if wait_s <= 0:
        return False
    if wait_s < 0.01:  # BLPOP counts its time out in ms, and takes 0 for "wait for ever"
        await asyncio.sleep(wait_s)
        return False
    try:
        return await redis.blpop([wake_key(node)], timeout=wait_s) is not None
    except Exception:  # Redis restarting: wait the time out
        await asyncio.sleep(wait_s)
        return False


def one_sample() -> dict:
    """One sample, read twice a second apart so that the rates have a baseline."""

    async def take() -> dict:
        sampler = Sampler()
        await sampler.sample()
        await asyncio.sleep(1.0)
        sample = await sampler.sample()
        sampler.nvml.close()
        return sample

    return asyncio.run(take())
