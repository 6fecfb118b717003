"""What the dashboard shows, as plain data: history, self-tests, the timeline, request figures.

Request figures come from what chat records per answer; ``monitor`` never imports
``chat``, so chat registers a provider here when it starts (``chat.apps``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from django.utils import timezone

from monitor.models import Event, MetricMinute, SelfTestResult
from monitor.telemetry.node_status import main_node

RequestFiguresProvider = Callable[[datetime], list[dict]]
_providers: list[RequestFiguresProvider] = []


def register_request_figures(provider: RequestFiguresProvider) -> None:
    """``provider(since)`` returns one dict per profile (see ``chat.conversations.stats``)."""
    if provider not in _providers:
        _providers.append(provider)


def request_figures(hours: float = 1.0) -> list[dict]:
    since = timezone.now() - timedelta(hours=hours)
    return [row for provider in _providers for row in provider(since)]


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def history(node: str, hours: float = 24.0) -> dict:
    """The node's minute means as columns for the charts: {"t": [...], "series": {name: [value or None, ...]}}.
    Rows from before there were nodes (no node) are the main box's."""
    nodes = [node, ""] if node == main_node() else [node]
    since = timezone.now() - timedelta(hours=hours)
    rows = list(MetricMinute.objects.filter(at__gte=since, node__in=nodes).values_list("at", "values"))
    names = sorted({name for _at, values in rows for name in values})
    return {
        "t": [at.timestamp() for at, _values in rows],
        "series": {name: [values.get(name) for _at, values in rows] for name in names},
    }


def self_test_payload(result: SelfTestResult) -> dict:
    return {
        "id": result.id,
        "profile": result.profile,
        "at": result.created_at.isoformat(),
        "ok": result.ok,
        "error": result.error,
        "prompt_tokens": result.prompt_tokens,
        "prompt_tps": result.prompt_tps,
        "generated_tokens": result.generated_tokens,
        "generation_tps": result.generation_tps,
        "ttft_ms": result.ttft_ms,
        "settings": result.settings_summary,
    }


def self_tests(limit: int = 20) -> list[dict]:
    return [self_test_payload(r) for r in SelfTestResult.objects.all()[:limit]]


def latest_self_test_per_profile() -> list[dict]:
    """The newest result of each profile, side by side."""
    seen: dict[str, dict] = {}
    for result in SelfTestResult.objects.all()[:200]:
        seen.setdefault(result.profile, self_test_payload(result))
    return sorted(seen.values(), key=lambda row: row["profile"])


def timeline(limit: int = 100) -> list[dict]:
    return [
        {
            "id": event.id,
            "at": event.created_at.isoformat(),
            "kind": event.kind,
            "kind_label": event.get_kind_display(),
            "level": event.level,
            "profile": event.profile,
            "node": event.node,
            "message": event.message,
        }
        for event in Event.objects.all()[:limit]
    ]
