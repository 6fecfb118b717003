"""MTP speculative decoding on the product's model family: llama-server's own draft acceptance.

The wired ``qwen35moe`` of tests/support/qwen35.py (its MTP block drafts the same bigram the
model follows) answers the same questions with ``--spec-type draft-mtp`` and, as the reference,
without it. The weights are synthetic: the acceptance shows that the path works (llama-server
loads the MTP block, drafts, verifies and counts), not what Qwen3.6 would reach.

Prints
  mtp_draft_accept_pct=    accepted / drafted tokens, from llama-server's /metrics
  mtp_drafted_tokens=      drafted tokens
  mtp_generation_tps= / reference_generation_tps=   generation speed with MTP and without
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

QUESTIONS = [f"Question {n}: why is the sky blue?" for n in range(8)]


def serve_and_ask(model: Path, extra: list[str]) -> tuple[dict[str, float], float]:
    """(llama-server's counters, generated tokens per second) after every question, thinking on and off."""
    port = stack.free_port()
    argv = [
        os.environ["LLAMA_SERVER_BIN"], "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
        "--ctx-size", "4096", "--parallel", "1", "--metrics", "--no-webui", "--threads", "2", *extra,
    ]  # fmt: skip
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            url = f"http://127.0.0.1:{port}"
            stack.wait_until(lambda: httpx.get(url + "/health", timeout=2).status_code == 200, 300, "llama-server")
            tokens = seconds = 0.0
            with httpx.Client(base_url=url, timeout=300) as client:
                for index, question in enumerate(QUESTIONS):
                    body = {
                        "messages": [{"role": "user", "content": question}], "max_tokens": 64, "temperature": 0,
                        "chat_template_kwargs": {"enable_thinking": bool(index % 2)},
                    }  # fmt: skip
                    timings = client.post("/v1/chat/completions", json=body).json()["timings"]
                    tokens += timings["predicted_n"]
                    seconds += timings["predicted_ms"] / 1000
                metrics = client.get("/metrics").text
        finally:
            server.terminate()
            server.wait(30)
    counters = {}
    for line in metrics.splitlines():
        name, _, value = line.partition(" ")
        if name.startswith("llamacpp:spec_decode") and "{" not in name:
            counters[name.removeprefix("llamacpp:")] = float(value)
    return counters, tokens / seconds if seconds else 0.0


def main() -> None:
    stack.end_on_signals()
    run_dir = stack.new_run_dir("qwenweb-bench-mtp-")
    stack.configure_environment(run_dir)
    from tests.support.qwen35 import write_qwen35

    model = write_qwen35(run_dir, projector=False)
    counters, mtp_tps = serve_and_ask(model, ["--spec-type", "draft-mtp", "--spec-draft-n-max", "3"])
    _reference, reference_tps = serve_and_ask(model, [])
    drafted = counters.get("spec_decode_num_draft_tokens_total", 0)
    accepted = counters.get("spec_decode_num_accepted_tokens_total", 0)
    print(f"mtp_drafted_tokens={drafted:.0f}")
    print(f"mtp_draft_accept_pct={accepted * 100 / drafted if drafted else 0:.1f}")
    print(f"mtp_generation_tps={mtp_tps:.1f}")
    print(f"reference_generation_tps={reference_tps:.1f}")


if __name__ == "__main__":
    main()
