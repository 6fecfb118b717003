"""/v1/embeddings through the gateway versus llama-server directly, same requests in one run.

The default install's embeddings profile (the default model, mean-pooled) embeds the same batches of
passages both ways, alternating which goes first. Prints per-run figures, then `embed_direct_tps=`,
`embed_api_tps=` (input tokens a second, medians, as llama-server counts them) and `embed_ratio=`
(gateway ÷ direct; the goal is >= 0.97).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

RUNS = 5  # each run embeds about 2,000 tokens both ways (7 s on 2 cores): the ratio's runs agree within 2%
MODEL = "embed-2k"
# A batch as a knowledge base's indexing sends it: 16 passages of about 125 tokens each.
PASSAGES = [
    f"Section {number}. The office keeps its travel, holiday and expense rules in one handbook; "
    f"rule {number} says how claims over {number * 10} euros are approved, who signs them and when "
    "they are paid, and what a person does when a receipt is lost or a trip is cancelled. " * 2
    for number in range(16)
]


def timed(client: httpx.Client, model: str) -> tuple[float, int]:
    """(seconds, input tokens) of one batch."""
    started = time.perf_counter()
    answer = client.post("/v1/embeddings", json={"model": model, "input": PASSAGES, "encoding_format": "float"})
    elapsed = time.perf_counter() - started
    if answer.status_code != 200:
        raise SystemExit(f"{answer.request.url}: {answer.status_code} {answer.text[:300]}")
    return elapsed, int(answer.json()["usage"]["prompt_tokens"])


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-", parallel=2)
    services = [stack.start_redis(run_dir)]
    llama = stack.start_llama(run_dir)
    services += [llama, stack.start_web(run_dir)]
    try:
        from chat.api.keys import create_key
        from monitor.models import ServerProfile
        from monitor.nodes.registry import placement_here
        from monitor.profiles.presets import live_id
        from tests.support.client import base_url, make_user

        _row, key = create_key(make_user(), "bench")
        direct_client = httpx.Client(
            base_url=llama.url, headers={"Authorization": f"Bearer {llama.env['LLAMA_API_KEY']}"}, timeout=300
        )
        api_client = httpx.Client(base_url=base_url(), headers={"Authorization": f"Bearer {key}"}, timeout=300)
        timed(api_client, MODEL)  # loads the profile, warms both paths
        profile = ServerProfile.objects.get(name=MODEL)
        paths = {"direct": (direct_client, live_id(profile, placement_here(profile))), "api": (api_client, MODEL)}
        timed(*paths["direct"])
        rates: dict[str, list[float]] = {"direct": [], "api": []}
        for run in range(RUNS):
            order = ["direct", "api"] if run % 2 == 0 else ["api", "direct"]
            for name in order:
                seconds, tokens = timed(*paths[name])
                rates[name].append(tokens / seconds)
            print(
                f"run {run + 1}: direct {rates['direct'][-1]:.0f} tok/s | api {rates['api'][-1]:.0f} tok/s", flush=True
            )
        direct, api = statistics.median(rates["direct"]), statistics.median(rates["api"])
        print(f"embed_direct_tps={direct:.0f} embed_api_tps={api:.0f}")
        print(f"embed_ratio={api / direct:.3f}")
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    main()
