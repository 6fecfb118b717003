"""How far the web process is from the least any relay on this stack can cost per streamed token.

`make run`'s stack streams at least 1000 tokens through the OpenAI gateway and through the chat
WebSocket, as bench/cpu_bench.py does; in the same run, against the same llama-server, on the
same frame clocks (``QWENWEB_API_FRAME_MS``, ``QWENWEB_CHAT_FRAME_MS``), two bare relays forward
the same streams (bench/relay_floor_apps.py): a bare Daphne app (Daphne as the product runs it,
no Django) and a bare asyncio server (no Twisted). Each process's CPU (user + system, every
thread) is read from /proc before and after. Rounds run the paths in turn, every other round in
the reverse order, so a host that slows down weighs on all of them. Prints, per 1000 tokens (the
mean of the rounds; each round's figures on a line before):

- `relay_api_web_cpu_s_per_1k_tokens=`: the gateway's web process;
- `floor_daphne_http_cpu_s_per_1k_tokens=`, `floor_asyncio_http_cpu_s_per_1k_tokens=`: the bare relays;
- `relay_chat_web_cpu_s_per_1k_tokens=`: the chat WebSocket's web process;
- `floor_daphne_ws_cpu_s_per_1k_tokens=`: the bare Daphne WebSocket relay;
- `relay_background_cpu_s_per_1k_tokens=`: the app's other processes (Redis, the Celery workers,
  beat, the sampler, the llama supervisor's Python, supervisord and its event listener) in the
  gateway's window: work the app does whoever streams.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import orjson
import psutil
from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cpu_bench  # noqa: E402

from scripts.local_services import free_port  # noqa: E402
from tests.support import stack  # noqa: E402
from tests.support.supervised import Supervised, supervised_env  # noqa: E402

ROUNDS = int(os.environ.get("QWENWEB_BENCH_ROUNDS", "2"))
HERE = Path(__file__).resolve().parent


def process_cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def tokens_through(stream_once, min_tokens: int = cpu_bench.MIN_TOKENS) -> int:
    tokens = 0
    while tokens < min_tokens:
        tokens += stream_once()
    return tokens


def per_1k(pid: int, stream_once) -> float:
    stream_once()  # warm-up: code paths, the prompt cached
    before = process_cpu(pid)
    tokens = tokens_through(stream_once)
    return (process_cpu(pid) - before) * 1000 / tokens


def floor_ws_answer(ws) -> int:
    """One answer through the bare WebSocket relay: SSE bytes in binary frames, the usage at the end."""
    question = {
        "messages": [{"role": "user", "content": cpu_bench.PROMPT}],
        "stream_options": {"include_usage": True},
        "seed": 7,
        "max_tokens": cpu_bench.ANSWER_TOKENS,
    }
    received = b""
    ws.send(orjson.dumps(question).decode())
    while b"data: [DONE]" not in received:
        received += ws.recv(timeout=300)
    for line in received.split(b"\n"):
        if line.startswith(b"data: {") and b'"usage"' in line:
            usage = orjson.loads(line[6:]).get("usage")
            if usage:
                return usage["completion_tokens"]
    raise RuntimeError("the bare relay's answer had no usage")


def loaded_model(llama_url: str, key: str) -> str:
    models = httpx.get(f"{llama_url}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=30).json()["data"]
    return next(model["id"] for model in models if (model.get("status") or {}).get("value") == "loaded")


def start_floor(kind: str, env: dict, run_dir: Path, cleanup: ExitStack) -> tuple[int, str]:
    """A bare relay on a free port, ended with ``cleanup``; its output in the run folder."""
    port = free_port()
    argv = [sys.executable, str(HERE / "relay_floor_apps.py"), kind, str(port)]
    log = cleanup.enter_context((run_dir / f"floor-{kind}.log").open("wb"))
    process = subprocess.Popen(argv, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT)
    cleanup.callback(process.wait, 30)
    cleanup.callback(process.kill)

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    stack.wait_until(listening, 60, f"the bare {kind} relay (its log: {log.name})", process=process)
    return process.pid, f"http://127.0.0.1:{port}"


def gateway_window(product: Supervised, run_dir: Path, api: httpx.Client) -> dict[str, float]:
    """The gateway's web process and the app's other processes, in one window."""
    cpu_bench.api_answer(api)
    with cpu_bench.CpuWindow(product, "api", run_dir) as window:
        tokens = tokens_through(lambda: cpu_bench.api_answer(api))
    print("gateway window, CPU s by process: " + " ".join(f"{k}={v:.2f}" for k, v in window.spent.items()))
    web = window.spent["web"]
    return {
        "relay_api_web": web * 1000 / tokens,
        "relay_background": (sum(window.spent.values()) - web) * 1000 / tokens,
    }


def main() -> None:
    from django.conf import settings

    run_dir = stack.django_run_dir("qwenweb-bench-floor-", parallel=2)
    product = Supervised(run_dir, supervised_env(run_dir, os.environ, fresh_ports=False))
    product.start()
    started = time.monotonic()
    rounds: dict[str, list[float]] = {}
    try:
        from chat.api.keys import create_key
        from tests.support.client import base_url, chat_socket, login, make_user

        _row, key = create_key(make_user(), "floor-bench")
        api = httpx.Client(base_url=base_url(), headers={"Authorization": f"Bearer {key}"}, timeout=300)
        with ExitStack() as stack_of, api:
            stack.wait_until(lambda: cpu_bench.answers(api), 300, "the stack under supervisord")
            env = {
                **product.env,
                "FLOOR_LLAMA_URL": product.env["LLAMA_SERVER_URL"],
                "FLOOR_LLAMA_KEY": settings.LLAMA_API_KEY,
                "FLOOR_LLAMA_MODEL": loaded_model(product.env["LLAMA_SERVER_URL"], settings.LLAMA_API_KEY),
                "FLOOR_FRAME_MS": str(round(settings.API_FRAME_S * 1000)),
                "FLOOR_WS_FRAME_MS": str(round(settings.CHAT_FRAME_S * 1000)),
            }
            bare_daphne, daphne_url = start_floor("daphne", env, run_dir, stack_of)
            bare_asyncio, asyncio_url = start_floor("asyncio", env, run_dir, stack_of)
            daphne_api = stack_of.enter_context(httpx.Client(base_url=daphne_url, timeout=300))
            asyncio_api = stack_of.enter_context(httpx.Client(base_url=asyncio_url, timeout=300))
            ws = stack_of.enter_context(chat_socket(login(make_user())))
            floor_ws = stack_of.enter_context(connect(daphne_url.replace("http", "ws") + "/", max_size=None))
            time.sleep(max(5.0, started + cpu_bench.WARM_UP_S - time.monotonic()))  # beat's tasks have run once
            web = product.pid_of("web")
            paths = [
                lambda: gateway_window(product, run_dir, api),
                lambda: {"floor_daphne_http": per_1k(bare_daphne, lambda: cpu_bench.api_answer(daphne_api))},
                lambda: {"floor_asyncio_http": per_1k(bare_asyncio, lambda: cpu_bench.api_answer(asyncio_api))},
                lambda: {
                    "relay_chat_web": per_1k(
                        web, lambda: cpu_bench.chat_answer(ws, cpu_bench.PROMPT)["stats"]["output_tokens"]
                    )
                },
                lambda: {"floor_daphne_ws": per_1k(bare_daphne, lambda: floor_ws_answer(floor_ws))},
            ]
            for index in range(ROUNDS):
                figures = {}
                for measure in paths if index % 2 == 0 else reversed(paths):  # every other round backwards
                    figures.update(measure())
                print(f"round {index + 1}: " + " ".join(f"{k}={v:.3f}" for k, v in figures.items()), flush=True)
                for name, value in figures.items():
                    rounds.setdefault(name, []).append(value)
    finally:
        product.shutdown()
    frames = f"api_frame_ms={round(settings.API_FRAME_S * 1000)} chat_frame_ms={round(settings.CHAT_FRAME_S * 1000)} "
    print(frames + " ".join(f"{name}_cpu_s_per_1k_tokens={statistics.mean(v):.3f}" for name, v in rounds.items()))


if __name__ == "__main__":
    main()
