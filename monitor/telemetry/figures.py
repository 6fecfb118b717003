"""What a sample's figures are made of: llama-server's /metrics and /slots read into our names, the
host's CPU and memory, a sample as flat series, and the minute means the history keeps."""

from __future__ import annotations

from collections import defaultdict

import psutil

# llama-server's /metrics names we chart, under our short names.
LLAMA_GAUGES = {
    "llamacpp:requests_processing": "requests_processing",
    "llamacpp:requests_deferred": "requests_deferred",
    "llamacpp:prompt_tokens_seconds": "prompt_tps_avg",
    "llamacpp:predicted_tokens_seconds": "generation_tps_avg",
}
LLAMA_COUNTERS = {
    "llamacpp:prompt_tokens_total": "prompt_tokens_total",
    "llamacpp:tokens_predicted_total": "generated_tokens_total",
    # Speculative decoding (a draft model or MTP): tokens drafted and accepted since the server started.
    "llamacpp:spec_decode_num_draft_tokens_total": "draft_tokens_total",
    "llamacpp:spec_decode_num_accepted_tokens_total": "draft_accepted_total",
}


def parse_llama_metrics(text: str) -> dict[str, float]:
    """llama-server's Prometheus text as {our name: value}; names we do not chart are dropped.

    Its lines are plain ``name value`` without labels; reading just those is some
    fifty times cheaper than a full exposition-format parser, once a second."""
    wanted = LLAMA_GAUGES | LLAMA_COUNTERS
    figures: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name, _, value = line.partition(" ")
        ours = wanted.get(name)
        if ours is not None:
            try:
                figures[ours] = float(value.split()[0])
            except (ValueError, IndexError):
                continue
    return figures


def slot_figures(slots: list[dict]) -> list[dict]:
    """Per slot: context size, tokens it holds (prompt + generated so far) and whether it is busy."""
    result = []
    for slot in slots:
        n_ctx = int(slot.get("n_ctx") or 0)
        decoded = sum(int(t.get("n_decoded") or 0) for t in slot.get("next_token") or ())
        used = int(slot.get("n_prompt_tokens") or 0) + decoded
        result.append(
            {
                "id": slot.get("id"),
                "n_ctx": n_ctx,
                "used": min(used, n_ctx) if n_ctx else used,
                "decoded": decoded,
                "processing": bool(slot.get("is_processing")),
            }
        )
    return result


def draft_figures(metrics: dict[str, float]) -> dict:
    """Speculative decoding since the server started: tokens drafted, accepted, and the share accepted
    (None without drafts: a server that does not speculate, or has not yet)."""
    drafted = int(metrics.get("draft_tokens_total") or 0)
    accepted = int(metrics.get("draft_accepted_total") or 0)
    share = round(accepted * 100 / drafted, 1) if drafted else None
    return {"draft_tokens": drafted, "draft_accepted": accepted, "draft_accept_pct": share}


def host_figures() -> dict:
    memory = psutil.virtual_memory()
    swap = psutil.swap_memory()
    return {
        "cpu_pct": psutil.cpu_percent(interval=None),
        "ram_used_bytes": memory.total - memory.available,
        "ram_total_bytes": memory.total,
        "swap_used_bytes": swap.used,
        "load1": psutil.getloadavg()[0],
    }


def flatten(sample: dict) -> dict[str, float]:
    """A sample as flat series {name: number}, the shape the charts and the history use."""
    values: dict[str, float] = {}
    for key, value in (sample.get("host") or {}).items():
        if isinstance(value, (int, float)):
            values[f"host.{key}"] = value
    for gpu in sample.get("gpu", {}).get("gpus", ()):
        for key in ("used_bytes", "total_bytes", "utilization_pct", "temperature_c", "power_w", "sm_clock_mhz"):
            if gpu.get(key) is not None:
                values[f"gpu{gpu['index']}.{key}"] = gpu[key]
    for server in sample.get("servers", ()):
        if not server.get("ok"):
            continue
        for key in ("prompt_tps", "generation_tps", "requests_processing", "requests_deferred", "kv_used_pct"):
            if server.get(key) is not None:
                values[f"llama.{server['profile']}.{key}"] = server[key]
    return values


class MinuteAverager:
    """Means of the flat series over each wall-clock minute, for the history rows."""

    def __init__(self) -> None:
        self.minute: int | None = None
        self.sums: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, t: float, values: dict[str, float]) -> tuple[int, dict[str, float]] | None:
        """Add one sample; returns (minute start, means) when ``t`` opens a new minute."""
        minute = int(t // 60) * 60
        finished = None
        if self.minute is not None and minute != self.minute and self.counts:
            finished = (self.minute, {k: round(self.sums[k] / self.counts[k], 3) for k in self.sums})
            self.sums.clear()
            self.counts.clear()
        self.minute = minute
        for key, value in values.items():
            self.sums[key] += value
            self.counts[key] += 1
        return finished
