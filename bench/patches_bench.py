"""What each patch into a library's internals (qwenweb/patches/) gains: the same process with it and without.

The web process: Daphne as `qwenweb.serve` starts it, in several copies at once
(bench/patches_bench_app.py): one with every patch (``on``), another with every patch (the
control: what two identical processes differ by on this host), and one per patch with that patch
left out. Each serves the kinds of traffic the patches are for, paced on a clock as an answer's
frames are: WebSocket frames through the product's socket stack (``ws_us_per_frame``),
server-sent events over HTTP (``sse_us_per_frame``), and calls to the API (``GET /v1/models`` with
an unknown key: the handler, the key's look-up in the database, a 401; ``api_us_per_call`` and
the median wall time, ``api_ms_per_call``). The process's CPU is read before and after each
stream: for the streams every thread's, in ns (/proc/PID/task/*/schedstat, not /proc's 10 ms
ticks); for the API calls /proc's ticks, which keep the CPU of threads that have ended. The
copies stream at the same time (one kind of traffic after the other), so whatever else the host
runs weighs on all of them alike.

A Celery worker: three idle workers on one Redis at once (bench/patches_bench_worker.py): kombu's
Redis transport as it comes, with the documented transport option a product worker gets, and the
product's (that option and the broker patch); their wake-ups (voluntary context switches) and CPU
per second over the same rounds.

Prints each round, then per patch and figure its medians with and without the patch, and the gain
measured within each round against the control's noise (``summary``). ``QWENWEB_BENCH_ROUNDS``
(default 14) and ``QWENWEB_BENCH_FRAMES`` (frames a stream, default 500; API calls: half) set the
size; the default takes about two minutes on two busy cores.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import httpx
import orjson
import psutil
from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.local_services import free_port  # noqa: E402
from tests.support import stack  # noqa: E402

HERE = Path(__file__).resolve().parent
ROUNDS = int(os.environ.get("QWENWEB_BENCH_ROUNDS", "14"))
FRAMES = int(os.environ.get("QWENWEB_BENCH_FRAMES", "500"))
API_CALLS = FRAMES // 2
EVERY_MS = 2
# The web processes: {name: patches left out}.
SERVERS = {
    "on": [],
    "control": [],
    "direct_writes": ["direct_writes"],
    "api_handler": ["api_handler"],
}
# The paths each patch is measured on: {measure: servers}.
PATHS = {
    "ws_us_per_frame": ["on", "control", "direct_writes"],
    "sse_us_per_frame": ["on", "control", "direct_writes"],
    "api_us_per_call": ["on", "control", "api_handler"],
    "api_ms_per_call": [],  # measured with api_us_per_call
}
WORKERS = ("kombu", "options", "product")
Measure = Callable[[], dict[str, float]]


def cpu_ns(pid: int) -> int:
    """The process's CPU so far, every live thread's, in ns (not /proc's 10 ms ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return total


def start(argv: list[str], name: str, run_dir: Path, cleanup: ExitStack) -> subprocess.Popen:
    log = cleanup.enter_context((run_dir / f"{name}.log").open("wb"))
    # One hash seed for every copy: dictionaries laid out alike, one difference fewer between them.
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    process = subprocess.Popen([sys.executable, *argv], cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT)
    cleanup.callback(process.wait, 30)
    cleanup.callback(process.kill)
    return process


def listening(port: int) -> bool:
    socket.create_connection(("127.0.0.1", port), timeout=1).close()
    return True


def start_web(run_dir: Path, cleanup: ExitStack) -> dict[str, tuple[int, int]]:
    """Every web process started at once; {name: (pid, port)} once all listen."""
    started = {}
    for name, leave_out in SERVERS.items():
        port = free_port()
        argv = [str(HERE / "patches_bench_app.py"), str(port), *leave_out]
        started[name] = (start(argv, f"web-{name}", run_dir, cleanup), port)
    for name, (process, port) in started.items():
        stack.wait_until(partial(listening, port), 90, f"web {name}", process, run_dir / f"web-{name}.log")
    return {name: (process.pid, port) for name, (process, port) in started.items()}


def ws_frames(ws, pid: int) -> dict[str, float]:
    before = cpu_ns(pid)
    ws.send(orjson.dumps({"frames": FRAMES, "every_ms": EVERY_MS}).decode())
    while orjson.loads(ws.recv(timeout=120)).get("type") != "done":
        pass
    return {"ws_us_per_frame": (cpu_ns(pid) - before) / FRAMES / 1000}


def sse_frames(client: httpx.Client, pid: int) -> dict[str, float]:
    before = cpu_ns(pid)
    with client.stream("GET", "/stream/", params={"frames": FRAMES, "every_ms": EVERY_MS}) as response:
        for _chunk in response.iter_bytes():
            pass
    return {"sse_us_per_frame": (cpu_ns(pid) - before) / FRAMES / 1000}


def process_cpu_s(pid: int) -> float:
    """The process's CPU so far, its ended threads' too (/proc's ticks): Django's pages' stack runs
    each request's sync work in a thread that ends with the request."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def api_calls(client: httpx.Client, pid: int) -> dict[str, float]:
    walls = []
    before = process_cpu_s(pid)
    for _ in range(API_CALLS):
        started = time.perf_counter()
        assert client.get("/v1/models", headers={"Authorization": "Bearer sk-unknown-bench-key"}).status_code == 401
        walls.append(time.perf_counter() - started)
    return {
        "api_us_per_call": (process_cpu_s(pid) - before) / API_CALLS * 1e6,
        "api_ms_per_call": statistics.median(walls) * 1000,
    }


def web_paths(run_dir: Path, cleanup: ExitStack) -> dict[str, list[tuple[str, Measure]]]:
    """{kind of traffic: [(server, one stream of it, measured)]}."""
    servers = start_web(run_dir, cleanup)
    paths: dict[str, list[tuple[str, Measure]]] = {"ws": [], "sse": [], "api": []}
    for name, (pid, port) in servers.items():
        if name in PATHS["ws_us_per_frame"]:
            ws = cleanup.enter_context(connect(f"ws://127.0.0.1:{port}/ws/frames/", origin=f"http://127.0.0.1:{port}"))
            paths["ws"].append((name, partial(ws_frames, ws, pid)))
        client = cleanup.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120))
        if name in PATHS["sse_us_per_frame"]:
            paths["sse"].append((name, partial(sse_frames, client, pid)))
        if name in PATHS["api_us_per_call"]:
            paths["api"].append((name, partial(api_calls, client, pid)))
    return paths


def at_once(measures: list[tuple[str, Measure]]) -> dict[str, dict[str, float]]:
    """Every server's stream at the same time, so that whatever else the host runs weighs on all
    of them alike; {figure: {server: value}}."""
    with ThreadPoolExecutor(len(measures)) as pool:
        results = {name: pool.submit(measure) for name, measure in measures}
        figures: dict[str, dict[str, float]] = {}
        for name, result in results.items():
            for figure, value in result.result().items():
                figures.setdefault(figure, {})[name] = value
    return figures


class IdleWorkers:
    """The three idle workers; ``window()`` gives each one's wake-ups and CPU per second since the last."""

    def __init__(self, run_dir: Path, cleanup: ExitStack):
        from qwenweb.celery import app

        self.processes = {
            name: start([str(HERE / "patches_bench_worker.py"), name], f"worker-{name}", run_dir, cleanup)
            for name in WORKERS
        }

        def all_answer() -> bool:
            hosts = {host.split("@")[0] for reply in app.control.ping(timeout=1) or [] for host in reply}
            return {f"bench-{name}" for name in WORKERS} <= hosts

        stack.wait_until(all_answer, 90, "the bench's Celery workers")
        time.sleep(5)  # their start-up done
        self.last = self._counters()

    def _counters(self) -> dict[str, tuple[float, int, int]]:
        counters = {}
        for name, process in self.processes.items():
            family = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
            cpu = sum(cpu_ns(member.pid) for member in family)
            wakeups = sum(member.num_ctx_switches().voluntary for member in family)
            counters[name] = (time.monotonic(), cpu, wakeups)
        return counters

    def window(self) -> dict[str, float]:
        now = self._counters()
        figures = {}
        for name, (at, cpu, wakeups) in now.items():
            was_at, was_cpu, was_wakeups = self.last[name]
            seconds = at - was_at
            figures[f"worker_{name}_wakeups_per_s"] = (wakeups - was_wakeups) / seconds
            figures[f"worker_{name}_cpu_ms_per_s"] = (cpu - was_cpu) / 1e6 / seconds
        self.last = now
        return figures


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-patches-")
    web: dict[str, dict[str, list[float]]] = {}  # {figure: {server: one value a round}}
    idle: dict[str, list[float]] = {}  # {figure: one value a round}
    with ExitStack() as cleanup:
        redis = stack.start_redis(run_dir)
        cleanup.callback(redis.stop)
        workers = IdleWorkers(run_dir, cleanup)
        paths = web_paths(run_dir, cleanup)
        for measures in paths.values():
            at_once(measures)  # warm-up: code paths, the database's first queries
        workers.window()
        for index in range(ROUNDS):
            line: dict[str, dict[str, float]] = {}
            for measures in paths.values():
                for figure, by_name in at_once(measures).items():
                    line[figure] = by_name
                    for name, value in by_name.items():
                        web.setdefault(figure, {}).setdefault(name, []).append(value)
            line["idle"] = workers.window()
            for figure, value in line["idle"].items():
                idle.setdefault(figure, []).append(value)
            print(f"round {index + 1}: " + report_line(line), flush=True)
    print(summary(web, idle))


def report_line(line: dict[str, dict[str, float]]) -> str:
    pairs = (f"{figure}:{name}={value:.2f}" for figure, by_name in line.items() for name, value in by_name.items())
    return " ".join(pairs)


def summary(web: dict[str, dict[str, list[float]]], idle: dict[str, list[float]]) -> str:
    """Per patch and figure: the medians with it (``_on``, the process with every patch) and without
    (``_off``), and the gain measured within each round, where all three copies met the same host:
    the median over rounds of what the copy without the patch spent more than the mean of the two
    with it (``_gain``), and in how many rounds it spent more (``_gain_rounds``; by chance half).
    ``control_..._noise`` is the same measure for two identical copies (half their difference): a
    gain shows where it is positive in most rounds and well above that."""
    lines = []
    for figure, by_name in web.items():
        on, control = by_name["on"], by_name["control"]
        base = [(a + c) / 2 for a, c in zip(on, control, strict=True)]
        noise = statistics.median(abs(a - c) / 2 for a, c in zip(on, control, strict=True))
        lines.append(
            f"control_{figure}_on={median(on)} control_{figure}_off={median(control)} control_{figure}_noise={noise:.2f}"
        )
        for name, off in by_name.items():
            if name in ("on", "control"):
                continue
            more = [o - b for o, b in zip(off, base, strict=True)]
            lines.append(
                f"{name}_{figure}_on={median(on)} {name}_{figure}_off={median(off)} {name}_{figure}_gain={median(more)} "
                f"{name}_{figure}_gain_rounds={sum(m > 0 for m in more)}/{len(more)}"
            )
    for unit in ("wakeups_per_s", "cpu_ms_per_s"):
        kombu, options, product = (idle[f"worker_{name}_{unit}"] for name in WORKERS)
        fewer = sum(p < o for p, o in zip(product, options, strict=True))
        lines.append(
            f"broker_worker_{unit}_on={median(product, 3)} broker_worker_{unit}_off={median(options, 3)} "
            f"broker_worker_{unit}_kombu={median(kombu, 3)} broker_worker_{unit}_gain_rounds={fewer}/{len(product)}"
        )
    return "\n".join(lines)


def median(values: list[float], digits: int = 2) -> str:
    return f"{statistics.median(values):.{digits}f}"


if __name__ == "__main__":
    main()
