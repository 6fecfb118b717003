"""The dashboard's request figures: per profile over a window, from what each answer recorded (``Message.stats``).

Registered with ``monitor.public.register_request_figures`` in ``chat.apps`` so the dashboard
can show them without ``monitor`` importing ``chat``.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from chat.models import Message
from monitor.public import LlamaError, find_profile, percentile


def _default_profile_name() -> str:
    try:
        return find_profile(None).name
    except LlamaError:
        return "default"


def request_figures(since: datetime) -> list[dict]:
    """One row per profile: answers, time to first token and generation tok/s at p50/p95."""
    rows = Message.objects.filter(
        role=Message.Role.ASSISTANT, created_at__gte=since, status=Message.Status.COMPLETE
    ).values_list("conversation__profile__name", "stats")
    default = None
    ttft: dict[str, list[float]] = defaultdict(list)
    speed: dict[str, list[float]] = defaultdict(list)
    answers: dict[str, int] = defaultdict(int)
    for profile, stats in rows:
        if profile is None:
            default = default or _default_profile_name()
            profile = default
        answers[profile] += 1
        stats = stats or {}
        if isinstance(stats.get("ttft_ms"), (int, float)):
            ttft[profile].append(stats["ttft_ms"])
        if isinstance(stats.get("tokens_per_second"), (int, float)) and stats["tokens_per_second"] > 0:
            speed[profile].append(stats["tokens_per_second"])
    return [
        {
            "profile": profile,
            "answers": answers[profile],
            "ttft_p50_ms": percentile(ttft[profile], 50),
            "ttft_p95_ms": percentile(ttft[profile], 95),
            "generation_tps_p50": percentile(speed[profile], 50),
            "generation_tps_p95": percentile(speed[profile], 95),
        }
        for profile in sorted(answers)
    ]
