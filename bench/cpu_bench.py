"""What the app's own processes cost the model: CPU per streamed token, per-turn overhead,
prompt-cache reuse, and llama-server's speed at candidate thread counts, in one run.

The stack is `make run`'s own, under the generated supervisord configuration: Redis, the
llama supervisor and llama-server, Daphne, the two Celery workers, beat, the sampler and the
event listener, at the priorities it sets. The CPU of every process but llama-server's is read
from /proc (psutil) before and after streaming at least 1000 tokens through the chat WebSocket,
then through the OpenAI gateway. Prints:

- `app_cpu_s_per_1k_tokens=` (chat) and `api_cpu_s_per_1k_tokens=` (gateway), with
  `chat_web_cpu_s_per_1k_tokens=` and `api_web_cpu_s_per_1k_tokens=` (Daphne alone), and each
  program's share on the line before;
- `chat_frames_per_1k_tokens=`: the events the chat socket carried per 1000 tokens (the frame
  clock's work: each is a wake-up, a parse and a write);
- `turn_overhead_ms=`: p50 time from sending a chat message to the ``started`` event,
  which the turn sends just before its upstream request (history, profile, serving info,
  context fitting, documents, queue), for a short follow-up, and `turn_app_cpu_ms=`: the app's
  CPU per such turn (4 tokens: what a turn costs besides its tokens);
- `followup_cached_pct=`: 4 people taking turns on 2 slots, the share of each follow-up's
  prompt llama-server served from its prompt cache (``timings.cache_n``), summed;
- `idle_app_cpu_pct=`: the same processes' CPU over 10 idle seconds, in % of one core;
- `threads_<n>_tps=`: llama-bench's generation tokens/s of the default model at the
  candidate thread counts (1..nproc), and `threads_best=`.

The CPU figures move by a quarter from run to run on a 2-core host: compare two checkouts in
alternating runs, with QWENWEB_BENCH_MIN_TOKENS=3000 (a longer window), QWENWEB_BENCH_NO_THREADS=1
(no llama-bench) and QWENWEB_TURNS_PER_MINUTE=100 (so the longer window's turns are not refused).
Set QWENWEB_BENCH_PYSPY to a py-spy binary to record the web process's profile (collapsed
stacks per path, in the run folder, for flamegraph.pl or speedscope) while it streams.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402
from tests.support.supervised import Supervised, supervised_env  # noqa: E402

MIN_TOKENS = int(os.environ.get("QWENWEB_BENCH_MIN_TOKENS", "1000"))
ANSWER_TOKENS = 256
PROMPT = "Write a long story about a lighthouse keeper and a storm."
PEOPLE, ROUNDS = 4, 3
IDLE_S = 10
WARM_UP_S = 65  # beat's tasks every 30 and 60 s have each run once
LOG_LINE = "Keeper %d, night %d: lamp lit at dusk, wind from the west, two ships passed, the fog horn sounded twice."


def app_cpu(product: Supervised) -> dict[int, tuple[str, float]]:
    """{pid: (program, user + system CPU seconds)} of every process of the app: supervisord, the
    programs `make run` starts and their children (Celery's pool, the llama supervisor's own Python),
    but not llama-server itself (the model: what the app's CPU is taken from)."""
    by_pid = {pid: name for name, pid in product.pids().items()}
    root = psutil.Process(product.process.pid)
    found = {root.pid: (root, "supervisord")}
    for process in root.children(recursive=True):
        found[process.pid] = (process, "")
    cpu = {}
    for pid, (process, name) in found.items():
        try:
            if process.name().startswith("llama-"):
                continue
            program = name or by_pid.get(pid) or _program_of(process, by_pid)
            times = process.cpu_times()
            cpu[pid] = (program, times.user + times.system)
        except psutil.NoSuchProcess:
            pass
    return cpu


def _program_of(process: psutil.Process, by_pid: dict[int, str]) -> str:
    for parent in process.parents():
        if parent.pid in by_pid:
            return by_pid[parent.pid]
    return "other"


class CpuWindow:
    """CPU spent by the app's processes between ``with`` and its end, by program."""

    def __init__(self, product: Supervised, profile_name: str, run_dir: Path):
        self.product = product
        self.web_pid = product.pid_of("web")
        self.profile_path = run_dir / f"profile-{profile_name}.txt"
        self.spent: dict[str, float] = {}
        self._spy = None

    def __enter__(self) -> CpuWindow:
        spy = os.environ.get("QWENWEB_BENCH_PYSPY")
        if spy:
            argv = [spy, "record", "--pid", str(self.web_pid), "--rate", "250", "--nonblocking", "--format", "raw"]
            argv += ["-o", str(self.profile_path)]
            self._spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)
        self.before = app_cpu(self.product)
        return self

    def __exit__(self, *exc) -> None:
        after = app_cpu(self.product)
        self.spent = {}
        for pid, (program, seconds) in after.items():
            earlier = self.before.get(pid, (program, 0.0))[1]  # a process born in the window counts whole
            self.spent[program] = self.spent.get(program, 0.0) + seconds - earlier
        if self._spy is not None:
            self._spy.send_signal(2)
            self._spy.wait(30)
            print(f"profile: {self.profile_path}")


def chat_answer(ws, text: str, conversation: str | None = None, max_tokens: int = ANSWER_TOKENS) -> dict:
    """Send one message and read its events; returns the turn's figures."""
    from tests.support.client import send

    sent = time.perf_counter()
    payload = {"type": "send", "text": text, "options": {"seed": 7, "max_tokens": max_tokens, "temperature": 0.7}}
    if conversation:
        payload["conversation"] = conversation
    send(ws, **payload)
    result = {"started_ms": None, "conversation": conversation, "frames": 0}
    while True:
        event = json.loads(ws.recv(timeout=300))
        result["frames"] += 1
        if event["type"] == "accepted":
            result["conversation"] = event["conversation"]
        elif event["type"] == "started" and result["started_ms"] is None:
            result["started_ms"] = (time.perf_counter() - sent) * 1000
        elif event["type"] in ("done", "error"):
            if event.get("status") != "complete":
                raise RuntimeError(event)
            result["stats"] = event["stats"]
            return result


def api_answer(client: httpx.Client) -> int:
    """One streamed gateway answer, read as a client would; returns its output tokens."""
    body = {
        "model": "chat-8k",
        "messages": [{"role": "user", "content": PROMPT}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "seed": 7,
        "max_tokens": ANSWER_TOKENS,
    }
    tokens = 0
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                usage = chunk.get("usage")
                if usage:
                    tokens = usage["completion_tokens"]
    return tokens


def per_1k(window: CpuWindow, tokens: int) -> tuple[float, float]:
    return sum(window.spent.values()) * 1000 / tokens, window.spent["web"] * 1000 / tokens


def round_trips() -> dict:
    """What the per-turn look-ups cost when they are not cached: the router's model list, /props."""
    import asyncio

    from monitor.llama.serving import serving_info
    from monitor.profiles.status import router_status
    from monitor.redis_clients import close_loop_clients
    from monitor.serving.slot import serving_pool

    async def timed() -> dict:
        client = (await serving_pool(None)).client
        times: dict[str, list[float]] = {"models": [], "props": []}
        for _ in range(20):
            started = time.perf_counter()
            await router_status(client, fresh=True)
            times["models"].append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await serving_info(client, fresh=True)
            times["props"].append((time.perf_counter() - started) * 1000)
        await close_loop_clients()
        return {f"{name}_round_trip_ms": f"{statistics.median(values):.2f}" for name, values in times.items()}

    return asyncio.run(timed())


def idle_part(product, run_dir: Path) -> dict:
    """What the app spends with nobody chatting: a cost per second that a per-token figure also carries."""
    with CpuWindow(product, "idle", run_dir) as window:
        time.sleep(IDLE_S)
    print("idle: CPU s by process: " + " ".join(f"{k}={v:.2f}" for k, v in window.spent.items()))
    return {"idle_app_cpu_pct": f"{100 * sum(window.spent.values()) / IDLE_S:.1f}"}


def chat_part(product, run_dir: Path) -> dict:
    from tests.support.client import chat_socket, login, make_user

    figures = {}
    with chat_socket(login(make_user())) as ws:
        chat_answer(ws, "Hello.", max_tokens=8)  # warm-up: the profile is loaded, the template measured
        tokens = 0
        with CpuWindow(product, "chat", run_dir) as window:
            frames = 0
            while tokens < MIN_TOKENS:
                answer = chat_answer(ws, PROMPT)
                tokens += answer["stats"]["output_tokens"]
                frames += answer["frames"]
        app, web = per_1k(window, tokens)
        print(f"chat: {tokens} tokens, CPU s by process: " + " ".join(f"{k}={v:.2f}" for k, v in window.spent.items()))
        figures.update(app_cpu_s_per_1k_tokens=f"{app:.3f}", chat_web_cpu_s_per_1k_tokens=f"{web:.3f}")
        figures["chat_frames_per_1k_tokens"] = f"{frames * 1000 / tokens:.0f}"
        # Per-turn overhead: short follow-ups in one conversation (history, fitting and the queue all run).
        overheads = []
        conversation = None
        with CpuWindow(product, "turns", run_dir) as turns_window:
            for index in range(8):
                answer = chat_answer(ws, f"Follow-up {index}: one more line, please.", conversation, max_tokens=4)
                conversation = answer["conversation"]
                overheads.append(answer["started_ms"])
        figures["turn_app_cpu_ms"] = f"{sum(turns_window.spent.values()) * 1000 / len(overheads):.2f}"
        figures["turn_overhead_ms"] = f"{statistics.median(overheads):.1f}"
    return figures


def api_part(product, run_dir: Path) -> dict:
    from chat.api.keys import create_key
    from tests.support.client import base_url, make_user

    _row, key = create_key(make_user(), "cpu-bench")
    with httpx.Client(base_url=base_url(), headers={"Authorization": f"Bearer {key}"}, timeout=300) as client:
        api_answer(client)  # warm-up
        tokens = 0
        with CpuWindow(product, "api", run_dir) as window:
            while tokens < MIN_TOKENS:
                tokens += api_answer(client)
    app, web = per_1k(window, tokens)
    print(f"api: {tokens} tokens, CPU s by process: " + " ".join(f"{k}={v:.2f}" for k, v in window.spent.items()))
    return {"api_cpu_s_per_1k_tokens": f"{app:.3f}", "api_web_cpu_s_per_1k_tokens": f"{web:.3f}"}


def followup_part() -> dict:
    """4 people, 2 slots: each takes a turn in their own conversation, round after round."""
    from tests.support.client import chat_socket, login, make_user

    sockets = [chat_socket(login(make_user())) for _ in range(PEOPLE)]
    conversations: list[str | None] = [None] * PEOPLE
    cached = total = 0
    try:
        for round_index in range(ROUNDS):
            for person, ws in enumerate(sockets):
                text = f"Person {person}, round {round_index}: one more fact about lighthouse number {person}, please."
                if not round_index:  # a long first message, as a pasted text: what a follow-up should not pay again
                    text = f"Person {person} read this log: " + " ".join(LOG_LINE % (person, n) for n in range(60))
                answer = chat_answer(ws, text, conversations[person], max_tokens=48)
                conversations[person] = answer["conversation"]
                if round_index:  # a follow-up: its conversation's earlier turns may be cached
                    stats = answer["stats"]
                    cached += stats.get("cached_tokens") or 0
                    total += (stats.get("cached_tokens") or 0) + (stats.get("prompt_tokens") or 0)
    finally:
        for ws in sockets:
            ws.close()
    return {"followup_cached_pct": f"{100 * cached / max(total, 1):.1f}"}


def run_llama_bench(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """llama-bench as the server runs: on an AMX host without repacking (monitor.llama.binary; llama-bench
    reads no LLAMA_ARG_*, and repacked weights crash its prompt processing there)."""
    from monitor.llama.binary import llama_environment

    env = llama_environment()
    if env.get("LLAMA_ARG_REPACK") == "false":
        argv = [*argv, "--repack", "0"]
    return subprocess.run(argv, check=True, capture_output=True, text=True, env=env, timeout=timeout)


def threads_part() -> dict:
    """llama-bench's generation speed of the default model at each candidate thread count."""
    bench = Path(os.environ["LLAMA_SERVER_BIN"]).with_name("llama-bench")
    model = next(Path(os.environ["QWENWEB_MODELS_DIR"]).glob("gemma-3-270m*.gguf")).resolve()
    candidates = sorted({1, *range(2, (os.cpu_count() or 1) + 1)})
    argv = [str(bench), "-m", str(model), "-p", "0", "-n", "64", "-r", "3", "-o", "json"]
    argv += ["-t", ",".join(str(n) for n in candidates)]
    result = run_llama_bench(argv, timeout=300)
    figures = {}
    for row in json.loads(result.stdout):
        figures[f"threads_{row['n_threads']}_tps"] = f"{row['avg_ts']:.1f}"
    best = max(figures, key=lambda name: float(figures[name]))
    figures["threads_best"] = re.search(r"\d+", best).group(0)
    return figures


def answers(client: httpx.Client) -> bool:
    try:
        body = {"model": "chat-8k", "messages": [{"role": "user", "content": "Hi."}], "max_tokens": 2}
        return client.post("/v1/chat/completions", json=body, timeout=30).status_code == 200
    except httpx.HTTPError:
        return False


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-cpu-", parallel=2)
    figures = {} if os.environ.get("QWENWEB_BENCH_NO_THREADS") else threads_part()  # first, alone on the box
    print(" ".join(f"{k}={v}" for k, v in figures.items()), flush=True)
    # `make run`'s own stack: supervisord with every program it starts, at the priorities it sets.
    product = Supervised(run_dir, supervised_env(run_dir, os.environ, fresh_ports=False))
    product.start()
    started = time.monotonic()
    try:
        from chat.api.keys import create_key
        from tests.support.client import base_url, make_user

        _row, key = create_key(make_user(), "cpu-bench-ready")
        with httpx.Client(base_url=base_url(), headers={"Authorization": f"Bearer {key}"}) as client:
            stack.wait_until(lambda: answers(client), 300, "the stack under supervisord")
        # The programs' start-up work done (migrations checked, first samples), and every periodic
        # task of a minute or less run once: a worker's first task pays for imports and first
        # queries, once per start (it had landed in the chat window, then in the gateway's).
        time.sleep(max(5.0, started + WARM_UP_S - time.monotonic()))
        figures.update(idle_part(product, run_dir))
        figures.update(round_trips())
        figures.update(chat_part(product, run_dir))
        figures.update(api_part(product, run_dir))
        figures.update(followup_part())
    finally:
        product.shutdown()
    print(" ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
