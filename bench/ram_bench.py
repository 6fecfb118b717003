"""System RAM: llama-server's resident memory after a workload that fills what it keeps, against the plan.

A ``qwen35moe`` (6 Gated DeltaNet layers whose state is 1 MiB each, 2 attention layers, experts;
Qwen3.5's tokenizer and template) runs on the CPU with 2 slots, a prompt cache cap (``--cache-ram``)
that holds about three conversations and a few context checkpoints per slot (``--ctx-checkpoints``).
Four people take turns on the two slots, each conversation growing turn by turn: follow-ups reuse
their prompt from a slot or the prompt cache (where their state waits while others use the slots),
checkpoints are made at each turn, and the cache fills and evicts at its cap (the server's log says
so). Then llama-server's resident memory (VmRSS: mapped weights it touched, buffers, caches, the
process) is compared with the planner's RAM for the same launch.

Prints
  ram_rss_mib= / ram_planned_mib=   measured and planned
  planner_ram_error_pct=            |measured - planned| / planned (target <= 10)
  prompt_reuse_pct=                 share of follow-up prompt tokens llama-server did not recompute
  checkpoint_mib= / checkpoint_planned_mib=   one checkpoint as llama-server logs it, and as planned
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

PEOPLE, TURNS, SLOTS = 4, 4, 2
CTX, CACHE_RAM_MIB, CHECKPOINTS = 16384, 88, 4
WORDS = "lighthouse harbour storm keeper report tide lantern rocks vessel signal".split()


def model_path(folder: Path) -> Path:
    from tests.support.qwen35 import chat_template, tokenizer
    from tests.support.synthetic_gguf import Q8_0, Shape, random_fill, write_model

    shape = Shape(
        "qwen35moe", n_layer=8, n_embd=256, n_head=4, n_head_kv=2, head_dim=64, n_expert=8, n_expert_used=2,
        n_ff_exp=64, n_ff_shexp=128, ssm_state=64, ssm_groups=8, ssm_v_heads=64, tokenizer=tokenizer(),
        chat_template=chat_template(), fill=random_fill(), weight_type=Q8_0, expert_type=Q8_0, tied_output=True,
    )  # fmt: skip
    return write_model(folder / "qwen35moe-ram.gguf", shape)


def user_text(person: int, turn: int) -> str:
    words = [WORDS[(person * 7 + turn * 3 + i) % len(WORDS)] for i in range(60)]
    return f"Person {person}, turn {turn}: " + " ".join(words)


def resident_mib(pid: int) -> dict[str, float]:
    """VmRSS and its anonymous and file-backed (mapped weights, the binary) parts, MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return {
        key: int(re.search(rf"{key}:\s+(\d+) kB", status).group(1)) / 1024 for key in ("VmRSS", "RssAnon", "RssFile")
    }


def run_workload(url: str) -> tuple[int, int]:
    """Every person's turns in rounds; returns (follow-up prompt tokens, of which reused)."""
    histories: list[list[dict]] = [[] for _ in range(PEOPLE)]
    total = reused = 0
    with httpx.Client(base_url=url, timeout=600) as client:
        for turn in range(TURNS):
            for person in range(PEOPLE):
                history = histories[person]
                history.append({"role": "user", "content": user_text(person, turn)})
                body = {
                    "messages": history, "max_tokens": 4, "temperature": 0,
                    "chat_template_kwargs": {"enable_thinking": False},
                }  # fmt: skip
                answer = client.post("/v1/chat/completions", json=body).json()
                history.append({"role": "assistant", "content": answer["choices"][0]["message"]["content"]})
                if turn:
                    timings = answer["timings"]
                    total += timings["prompt_n"] + timings["cache_n"]
                    reused += timings["cache_n"]
    return total, reused


def main() -> None:
    stack.end_on_signals()
    run_dir = stack.new_run_dir("qwenweb-bench-ram-")
    stack.configure_environment(run_dir)
    from monitor.catalog.planner import MIB, PlanRequest, plan
    from monitor.catalog.registry import read_model_info

    path = model_path(run_dir)
    port = stack.free_port()
    argv = [
        os.environ["LLAMA_SERVER_BIN"], "--model", str(path), "--host", "127.0.0.1", "--port", str(port),
        "--ctx-size", str(CTX), "--parallel", str(SLOTS), "--cache-ram", str(CACHE_RAM_MIB),
        "--ctx-checkpoints", str(CHECKPOINTS), "--no-webui", "--log-verbosity", "4", "--threads", "2",
    ]  # fmt: skip
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            url = f"http://127.0.0.1:{port}"
            stack.wait_until(lambda: httpx.get(url + "/health", timeout=2).status_code == 200, 300, "llama-server")
            started = time.monotonic()
            total, reused = run_workload(url)
            seconds = time.monotonic() - started
            memory = resident_mib(server.pid)
            rss = memory["VmRSS"]
        finally:
            server.terminate()
            server.wait(30)
        log.seek(0)
        text = log.read()
    request = PlanRequest(ctx_size=CTX, parallel=SLOTS, cache_ram_mib=CACHE_RAM_MIB, ctx_checkpoints=CHECKPOINTS)
    planned = plan(read_model_info(path), request)
    print("planned RAM (MiB): " + ", ".join(f"{key} {value / MIB:.1f}" for key, value in planned.ram_items.items()))
    sizes = [float(size) for size in re.findall(r"created context checkpoint .*?size = ([\d.]+) MiB", text)]
    evicted = len(re.findall(r"removing oldest entry", text))
    print(f"workload: {PEOPLE} people x {TURNS} turns on {SLOTS} slots in {seconds:.0f} s; "
          f"{len(sizes)} checkpoints made, {evicted} prompt cache entries evicted at the cap")  # fmt: skip
    print(f"resident (MiB): anonymous {memory['RssAnon']:.1f}, file-backed {memory['RssFile']:.1f}")
    error = abs(rss - planned.ram / MIB) / (planned.ram / MIB) * 100
    print(f"ram_rss_mib={rss:.1f}")
    print(f"ram_planned_mib={planned.ram / MIB:.1f}")
    print(f"planner_ram_error_pct={error:.2f}")
    print(f"prompt_reuse_pct={reused * 100 / max(total, 1):.1f}")
    if sizes:
        print(f"checkpoint_mib={max(sizes):.2f}")
    print(f"checkpoint_planned_mib={planned.checkpoint_bytes / MIB:.2f}")


if __name__ == "__main__":
    main()
