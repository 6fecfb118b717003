"""The app's own Prometheus metrics for ``/metrics``: the main box's newest dashboard sample,
every node's heartbeat, request figures, self-test results and the timeline's counts.

Figures are read from the shared stores (Redis, the database) at scrape time, so
every process (Daphne, Celery, the sampler) counts, not only the one scraped.
"""

from __future__ import annotations

import hmac

import orjson
import redis
from django.conf import settings
from django.db.models import Count
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from monitor.models import Event
from monitor.redis_clients import sync_client
from monitor.telemetry import dashboard
from monitor.telemetry.live import live_key
from monitor.telemetry.node_status import Beat, add_beat_reads, beats_from, main_node, node_rows

# Gauges per row, (key, help): a GPU's, a profile's server's, a profile's requests', its newest self-test's.
GPU_GAUGES = (
    ("used_bytes", "GPU memory in use"),
    ("total_bytes", "GPU memory"),
    ("utilization_pct", "GPU utilization, percent"),
    ("temperature_c", "GPU temperature, Celsius"),
    ("power_w", "GPU power draw, watts"),
    ("sm_clock_mhz", "GPU SM clock, MHz"),
)
LLAMA_GAUGES = (
    ("prompt_tps", "Prompt tokens processed per second of wall clock"),
    ("generation_tps", "Tokens generated per second of wall clock"),
    ("requests_processing", "Requests llama-server is processing"),
    ("requests_deferred", "Requests llama-server deferred"),
    ("kv_used_pct", "Share of the slots' context in use, percent"),
)
REQUEST_GAUGES = (
    ("answers", "Complete answers in the last hour"),
    ("ttft_p50_ms", "Time to first token, median over the last hour, ms"),
    ("ttft_p95_ms", "Time to first token, 95th percentile over the last hour, ms"),
    ("generation_tps_p50", "Generation tokens/s, median over the last hour"),
    ("generation_tps_p95", "Generation tokens/s, 95th percentile over the last hour"),
)
SELF_TEST_GAUGES = (
    ("prompt_tps", "Newest self-test: prompt tokens/s"),
    ("generation_tps", "Newest self-test: generation tokens/s"),
    ("ttft_ms", "Newest self-test: time to first token, ms"),
)
BY_PROFILE = {"profile": "profile"}

# Collectors other apps add (chat's usage counters: monitor never imports chat), read at every scrape.
_collectors: list = []


def register_collector(collector) -> None:
    """``collector.collect()`` yields metric families for ``/metrics`` besides the dashboard's own."""
    if collector not in _collectors:
        _collectors.append(collector)


def token_allows(header: str) -> bool:
    """A scraper's ``Authorization: Bearer <QWENWEB_METRICS_TOKEN>``; no token set: never."""
    expected = settings.METRICS_TOKEN
    if not expected or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[7:].strip().encode(), expected.encode())


def _read_redis() -> tuple[dict | None, dict[str, Beat]]:
    """The main box's newest sample and every node's beat (none of either while Redis is away)."""
    names = [node["name"] for node in node_rows()]
    pipe = sync_client(timeout_s=2).pipeline(transaction=False)
    pipe.lindex(live_key(main_node()), 0)
    add_beat_reads(pipe, names)
    try:
        raw, *replies = pipe.execute()
    except redis.RedisError:
        return None, {}
    return (orjson.loads(raw) if raw else None), beats_from(names, replies)


def _gauge(name: str, help_text: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"qwenweb_{name}", help_text, labels=labels)


def _gauges(prefix: str, fields: tuple[tuple[str, str], ...], rows, labels: dict[str, str]):
    """A gauge per (key, help) of ``fields``, with a value for each of ``rows`` that has that key;
    ``labels``: label -> the row's key that holds its value."""
    for key, help_text in fields:
        metric = _gauge(f"{prefix}_{key}", help_text, list(labels))
        for row in rows:
            if row.get(key) is not None:
                metric.add_metric([str(row[field]) for field in labels.values()], row[key])
        yield metric


class DashboardCollector:
    def collect(self):
        sample, beats = _read_redis()
        up = _gauge("sampler_sample_timestamp_seconds", "When the newest dashboard sample was taken", [])
        if sample:
            up.add_metric([], sample["t"])
            yield from self._sample(sample)
        yield up
        yield from self._nodes(beats)
        yield from _gauges("requests", REQUEST_GAUGES, dashboard.request_figures(hours=1), BY_PROFILE)
        yield from _gauges("selftest", SELF_TEST_GAUGES, dashboard.latest_self_test_per_profile(), BY_PROFILE)
        events = CounterMetricFamily(
            "qwenweb_events", "Timeline events recorded, by kind and level", labels=["kind", "level"]
        )
        for row in Event.objects.values("kind", "level").annotate(n=Count("id")):
            events.add_metric([row["kind"], row["level"]], row["n"])
        yield events

    def _sample(self, sample: dict):
        host = sample.get("host") or {}
        for key, help_text in (
            ("cpu_pct", "Host CPU use, percent"),
            ("ram_used_bytes", "Host RAM in use"),
            ("ram_total_bytes", "Host RAM"),
            ("swap_used_bytes", "Host swap in use"),
        ):
            if host.get(key) is not None:
                metric = _gauge(f"host_{key}", help_text, [])
                metric.add_metric([], host[key])
                yield metric
        gpu_info = sample.get("gpu") or {}
        available = _gauge("gpu_available", "1 when NVML answered", [])
        available.add_metric([], 1 if gpu_info.get("available") else 0)
        yield available
        yield from _gauges("gpu", GPU_GAUGES, gpu_info.get("gpus") or (), {"gpu": "index", "name": "name"})
        servers = sample.get("servers") or ()
        server_up = _gauge("llama_up", "1 when the profile's llama-server answered the last sample", ["profile"])
        for server in servers:
            server_up.add_metric([server["profile"]], 1 if server.get("ok") else 0)
        yield server_up
        yield from _gauges("llama", LLAMA_GAUGES, servers, BY_PROFILE)

    def _nodes(self, beats: dict[str, Beat]):
        node_up = _gauge("node_up", "1 while the node's heartbeat is there (it answers), 0 once it is gone", ["node"])
        age = _gauge("node_heartbeat_age_seconds", "Seconds since the node's last heartbeat", ["node"])
        for name, beat in beats.items():
            node_up.add_metric([name], 1 if beat.up else 0)
            if beat.age_s is not None:
                age.add_metric([name], beat.age_s)
        yield node_up
        yield age


def render() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DashboardCollector())
    for collector in _collectors:
        registry.register(collector)
    return generate_latest(registry)
