"""CPU cost of the dashboard's sampler, against a real llama-server and Redis.

Ours: the long-lived sampler process (``manage.py run_sampler``, as `make run` runs it), one
sample a second, its CPU time over the wall time (paused while the reference runs). Reference: the same sample as a Celery
task sent once a second (a beat entry per second), CPU time of the worker process (the beat
scheduler's own cost not counted). Alternating windows, medians.
Prints `sampler_cpu_pct=` (percent of one core; target < 1) and `celery_task_cpu_pct=`.

Those windows are short and read CPU time in clock ticks (10 ms), too coarse for a process that
samples every 10 s while no dashboard is open. So the sampler alone is also measured from the
scheduler's own nanosecond count (/proc/PID/task/*/schedstat): `sampler_idle_cpu_ms_per_s=` over
IDLE_S with no dashboard open (a sample every QWENWEB_SAMPLE_IDLE_INTERVAL_S, and on the main box
its check of the nodes' heartbeats), `sampler_watched_cpu_ms_per_s=` over WATCHED_S while a
dashboard is open (the key an open dashboard keeps set: a sample a second).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import stack  # noqa: E402

SAMPLES = 20
ROUNDS = 2
IDLE_S = 120
WATCHED_S = 30


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system + sum(c.cpu_times().user + c.cpu_times().system for c in process.children())


def ours(sampler: psutil.Process) -> float:
    """The sampler process as `make run` runs it, let run for one window."""
    sampler.resume()
    started_cpu, started = cpu_seconds(sampler), time.monotonic()
    time.sleep(SAMPLES)
    used = cpu_seconds(sampler) - started_cpu
    elapsed = time.monotonic() - started
    sampler.suspend()  # so it does not compete with the reference's window
    return used / elapsed * 100


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of the process, in ns, as the scheduler counts it."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):  # a thread that just ended
            continue
    return total


def ms_per_s(sampler: psutil.Process, seconds: float, *, watched: bool) -> float:
    """The sampler's CPU over ``seconds``, in ms a second; ``watched``: as while a dashboard is open
    (set before the sampler resumes: it takes its first sample at once, sees it and keeps to 1 s)."""
    import redis
    from django.conf import settings

    from monitor.telemetry.sampler import WATCHED_KEY

    client = redis.Redis.from_url(settings.REDIS_URL)

    def wait(wait_s: float) -> None:
        until = time.monotonic() + wait_s
        while time.monotonic() < until:
            if watched:
                client.set(WATCHED_KEY, 1, ex=5)  # what each open dashboard's socket does every second
            time.sleep(min(1.0, max(0.0, until - time.monotonic())))

    client.delete(WATCHED_KEY)
    wait(0)
    sampler.resume()
    wait(2 if watched else 2 * settings.MONITOR_IDLE_SAMPLE_INTERVAL_S)  # settled into its rhythm
    started_cpu, started = cpu_ns(sampler.pid), time.monotonic()
    wait(seconds)
    used_ms = (cpu_ns(sampler.pid) - started_cpu) / 1e6
    elapsed = time.monotonic() - started
    sampler.suspend()
    client.delete(WATCHED_KEY)
    client.close()
    return used_ms / elapsed


def reference(worker: psutil.Process) -> float:
    from qwenweb.celery import app

    started_cpu, started = cpu_seconds(worker), time.monotonic()
    results = []
    for i in range(SAMPLES):
        results.append(app.send_task("bench.sample_once"))
        time.sleep(max(0.0, started + i + 1 - time.monotonic()))
    for result in results:
        result.get(timeout=30)
    return (cpu_seconds(worker) - started_cpu) / (time.monotonic() - started) * 100


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-", parallel=2)
    services = [stack.start_redis(run_dir), stack.start_llama(run_dir)]
    try:
        os.environ["PYTHONPATH"] = str(Path(__file__).parent) + os.pathsep + os.environ.get("PYTHONPATH", "")
        worker_service = stack.Service(
            "celery-bench",
            [str(Path(sys.executable).parent / "celery"), "-A", "qwenweb", "worker", "-I", "sampler_celery_task",
             "--concurrency", "1", "--pool", "solo", "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
            run_dir,
        )  # fmt: skip
        worker_service.start()
        services.append(worker_service)
        from qwenweb.celery import app

        stack.wait_until(lambda: bool(app.control.ping(timeout=0.5)), 60, "celery worker", worker_service.process)
        app.send_task("bench.sample_once").get(timeout=60)  # warm: imports and the first sample
        worker = psutil.Process(worker_service.process.pid)
        sampler_service = stack.start_sampler(run_dir)  # `manage.py run_sampler`, waits for its first sample
        services.append(sampler_service)
        time.sleep(3)  # past start-up
        sampler = psutil.Process(sampler_service.process.pid)
        sampler.suspend()
        ours_pct, reference_pct = [], []
        for round_ in range(ROUNDS):
            ours_pct.append(ours(sampler))
            reference_pct.append(reference(worker))
            print(f"round {round_}: sampler {ours_pct[-1]:.2f} %, celery task {reference_pct[-1]:.2f} %", flush=True)
        idle = ms_per_s(sampler, IDLE_S, watched=False)
        watched = ms_per_s(sampler, WATCHED_S, watched=True)
        print(f"samples_per_window={SAMPLES}")
        print(f"celery_task_cpu_pct={statistics.median(reference_pct):.2f}")
        print(f"sampler_cpu_pct={statistics.median(ours_pct):.2f}")
        print(f"sampler_idle_cpu_ms_per_s={idle:.3f}")
        print(f"sampler_watched_cpu_ms_per_s={watched:.3f}")
    finally:
        for service in reversed(services):
            if service.process and service.process.poll() is None:
                psutil.Process(service.process.pid).resume()
            service.stop()


if __name__ == "__main__":
    main()
