"""What the running llama-server serves: context per slot, slots, vision. Cached per served model.

The key is the server and the model id a request names; a local profile's id carries its
revision, and every change of its launch options (``--parallel`` among them) makes a new
revision (``save_profile``), so a reloaded profile is a new key in every process (web,
worker) at once, with no message between them. A minute's cache saves a chat's follow-ups
the /props round trip (bench/cpu_bench.py: props_round_trip_ms=); a server that went away
or broke a stream is forgotten at once (``forget_serving_info``), and a remote server's
change is seen within the minute. At most CACHE_ENTRIES are kept: past that, the oldest read goes
first (revisions come and go, so old ids would otherwise stay for the process's life).
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass

from monitor.llama.client import LlamaClient, local_client

CACHE_SECONDS = 60.0
CACHE_ENTRIES = 64


@dataclass(frozen=True)
class ServingInfo:
    model: str
    n_ctx: int  # per slot: the most one request can use, prompt and answer together
    total_slots: int
    vision: bool
    template_key: str  # changes when the chat template does
    tools: bool = False  # the chat template renders tool calls (llama-server's chat_template_caps)

    @classmethod
    def from_props(cls, props: dict) -> ServingInfo:
        settings = props.get("default_generation_settings", {})
        return cls(
            model=props.get("model_alias") or props.get("model_path", ""),
            n_ctx=int(settings.get("n_ctx") or props.get("n_ctx") or 0),
            total_slots=int(props.get("total_slots") or 1),
            vision=bool(props.get("modalities", {}).get("vision")),
            template_key=hashlib.sha256(str(props.get("chat_template", "")).encode()).hexdigest()[:16],
            tools=bool((props.get("chat_template_caps") or {}).get("supports_tool_calls")),
        )


_cache: dict[tuple[str, str | None], tuple[float, ServingInfo]] = {}  # oldest read first
_cache_lock = threading.Lock()


async def serving_info(client: LlamaClient | None = None, *, fresh: bool = False) -> ServingInfo:
    """Raises LlamaUnavailable when the server is down, so callers can say so."""
    client = client or local_client()
    key = (client.base_url, client.model)
    now = time.monotonic()
    cached = _cache.get(key)
    if not fresh and cached and now - cached[0] < CACHE_SECONDS:
        return cached[1]
    info = ServingInfo.from_props(await client.get_json("/props"))
    with _cache_lock:
        _cache.pop(key, None)
        _cache[key] = (now, info)
        while len(_cache) > CACHE_ENTRIES:
            del _cache[next(iter(_cache))]
    return info


def forget_serving_info() -> None:
    with _cache_lock:
        _cache.clear()
