"""Read the buffer sizes llama-server prints while it loads a model."""

from __future__ import annotations

import re
from collections import defaultdict

_BUFFER = re.compile(r"(\S+) (model|KV|RS|compute|output) buffer size =\s+([\d.]+) MiB")


_NEW_CONTEXT = "llama_context: constructing llama_context"


def buffer_sizes(log_text: str) -> dict[str, dict[str, float]]:
    """{"model": {"CPU_Mapped": 235.16, ...}, "KV": {"CPU": 42.0}, ...} in MiB, summed per device.

    A context may reserve its compute graph again (the MTP draft does, once sampling is set up):
    the scheduler keeps one buffer per device, the largest reserved, so each context counts once."""
    sizes: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for section in log_text.split(_NEW_CONTEXT):
        compute: dict[str, float] = {}
        for device, kind, mib in _BUFFER.findall(section):
            if kind == "compute":
                compute[device] = max(compute.get(device, 0.0), float(mib))
            else:
                sizes[kind][device] += float(mib)
        for device, mib in compute.items():
            sizes["compute"][device] += mib
    return {kind: dict(devices) for kind, devices in sizes.items()}


_FIT_HOST = re.compile(r"- Host\s*\|\s*(\d+) =\s*(\d+) \+\s*(\d+) \+\s*(\d+)")


def fit_host_breakdown(log_text: str) -> dict[str, int] | None:
    """llama.cpp's own fitting projection for host memory (MiB, rounded): total = model + context + compute."""
    match = _FIT_HOST.search(log_text)
    if not match:
        return None
    total, model, context, compute = (int(value) for value in match.groups())
    return {"total": total, "model": model, "context": context, "compute": compute}
