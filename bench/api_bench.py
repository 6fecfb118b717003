"""The OpenAI-compatible gateway versus llama-server directly, same requests in one run.

Both paths get the same streamed chat request (fixed seed, 128 tokens), alternating,
read by the same client code. Prints per-run figures, then `api_tps=`, `direct_tps=`,
llama-server's own speed on the direct path (the gateway removes llama-server's
``timings`` from answers), and `api_ratio=` (gateway tokens/s ÷ direct, medians) with
`ttft_added_ms=` (also printed as `api_ttft_added_ms=`, the name `make bench` gives it beside the chat's).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stream_bench import timed_stream  # noqa: E402  (bench/ is the script's folder)

from tests.support import stack  # noqa: E402

RUNS = 7
BODY = {
    "model": "chat-8k",
    "messages": [{"role": "user", "content": "Write a story about a lighthouse keeper and a storm."}],
    "stream": True,
    "seed": 1234,
    "max_tokens": 128,
    "temperature": 0.7,
}


def streamed_run(client: httpx.Client, path: str, model: str) -> tuple[float, float, int, float]:
    """(ttft ms, tokens/s as received, tokens, llama-server's own tokens/s)."""
    return timed_stream(client, path, {**BODY, "model": model})


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-", parallel=2)
    services = [stack.start_redis(run_dir)]
    llama = stack.start_llama(run_dir)
    services += [llama, stack.start_web(run_dir)]
    try:
        from chat.api.keys import create_key
        from tests.support.client import base_url, make_user

        _row, key = create_key(make_user(), "bench")
        # Kept-alive clients on both sides: neither path pays per-request connection set-up.
        direct_client = httpx.Client(
            base_url=llama.url, headers={"Authorization": f"Bearer {llama.env['LLAMA_API_KEY']}"}, timeout=120
        )
        api_client = httpx.Client(base_url=base_url(), headers={"Authorization": f"Bearer {key}"}, timeout=120)
        # The gateway takes the profile's name; llama-server's router, the id of the profile's live instance.
        models = {"direct": llama.model_id, "api": BODY["model"]}
        streamed_run(direct_client, "/v1/chat/completions", models["direct"])  # warm-up
        streamed_run(api_client, "/v1/chat/completions", models["api"])
        direct, api = [], []
        for run in range(RUNS):
            # Alternate which goes first, so neither always follows the other's cache state.
            order = [("direct", direct_client, direct), ("api", api_client, api)]
            for name, client, results in order if run % 2 == 0 else reversed(order):
                results.append(streamed_run(client, "/v1/chat/completions", models[name]))
            print(
                f"run {run + 1}: direct ttft={direct[-1][0]:.1f}ms {direct[-1][1]:.1f} tok/s "
                f"(server {direct[-1][3]:.1f}, {direct[-1][2]} tokens) | "
                f"api ttft={api[-1][0]:.1f}ms {api[-1][1]:.1f} tok/s ({api[-1][2]} tokens)",
                flush=True,
            )
        direct_tps = statistics.median(d[1] for d in direct)
        api_tps = statistics.median(a[1] for a in api)
        print(f"direct_tps={direct_tps:.1f} api_tps={api_tps:.1f}")
        print(f"server_tps_direct={statistics.median(d[3] for d in direct):.1f}")
        added = statistics.median(a[0] for a in api) - statistics.median(d[0] for d in direct)
        print(f"api_ratio={api_tps / direct_tps:.3f} ttft_added_ms={added:.1f} api_ttft_added_ms={added:.1f}")
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    main()
