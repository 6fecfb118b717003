"""Switching server profiles versus the time llama-server itself needs to load the model.

Two profiles of the same model file (the seeded chat profile and a 4K one-slot clone).
Each run presses "load" on the other profile (the same service the admin page's Load
button runs in the worker) and times until the first token streams through it; the
router loads the new instance beside the old one, then unloads the old one.

The floor: a plain llama-server process with the same settings, from its start to the
first streamed token of the same request. Prints medians over 5 runs each:
`profile_switch_s=`, `model_load_floor_s=`, `switch_over_floor=` (target <= 1.5).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

RUNS = 5
BODY = {"messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4, "seed": 1, "stream": True}


def first_token(url: str, headers: dict, model: str | None) -> None:
    body = {**BODY, **({"model": model} if model else {})}
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, headers=headers, timeout=120) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if '"content"' in line:
                return
    raise RuntimeError("no token")


def floor_run(run_dir: Path, argv: list[str], env: dict, url: str, headers: dict) -> float:
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None:
                raise RuntimeError("llama-server exited")
            time.sleep(0.01)
        first_token(url, headers, None)
        return time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(30)


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-profiles-")
    from monitor.models import ServerProfile
    from monitor.profiles.loading import load_profile
    from monitor.profiles.options import profile_argv, write_template
    from monitor.profiles.services import save_profile
    from tests.support.profiles import live_id_here

    services = [stack.start_redis(run_dir)]
    llama = stack.start_llama(run_dir)
    services.append(llama)
    try:
        first = ServerProfile.objects.get(is_default=True)
        second = ServerProfile.objects.get(pk=first.pk)
        second.pk, second.name, second.is_default, second.ctx_size, second.parallel = None, "bench-4k", False, 4096, 1
        second.revision_options = []
        save_profile(second)
        switches, floors = [], []
        write_template(first)
        for run in range(RUNS * 2 + 1):
            target = ServerProfile.objects.get(pk=(second if run % 2 == 0 else first).pk)
            started = time.perf_counter()
            asyncio.run(load_profile(target))
            loaded = time.perf_counter()
            first_token(llama.url, llama.headers, live_id_here(ServerProfile.objects.get(pk=target.pk)))
            seconds = time.perf_counter() - started
            line = f"switch to {target.name}: {seconds:.2f} s (loaded after {loaded - started:.2f} s)"
            if run:  # the very first load of bench-4k is not a switch: chat-8k was alone
                switches.append(seconds)
            if run % 2 == 1:  # alternate with the reference, so both see the same machine
                port = stack.free_port()
                argv = profile_argv(first, os.environ["LLAMA_SERVER_BIN"], host="127.0.0.1", port=port)
                floors.append(floor_run(run_dir, argv, llama.env, f"http://127.0.0.1:{port}", llama.headers))
                line += f" | plain llama-server start to first token: {floors[-1]:.2f} s"
            print(line)
        switch, floor = statistics.median(switches), statistics.median(floors)
        print(f"profile_switch_s={switch:.2f} model_load_floor_s={floor:.2f} switch_over_floor={switch / floor:.2f}")
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    main()
