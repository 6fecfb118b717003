"""A soak: several people chatting over WebSockets and API clients for a bounded time, the box's
processes watched for growth.

People (threads) log in, open the chat socket, send messages (a new conversation every few turns,
follow-ups in between), press Stop on some answers after their first text, and close and reopen
their socket every few turns (a reconnect subscribes to the last conversation, as a page that comes
back does). API clients call ``/v1/chat/completions`` on the default profile, streamed and not.
Every few seconds the watcher reads each process's private memory (USS, psutil's
``memory_full_info``), file descriptors and threads, Redis's ``used_memory`` and key count, the
database's and the log folder's size.

After the warm-up (the first quarter of the time, at least one sample) it prints, with a turn being
a chat answer or an API call:

- ``soak_web_kib_per_1k_turns=``, ``soak_worker_kib_per_1k_turns=``, ``soak_documents_kib_per_1k_turns=``,
  ``soak_beat_kib_per_1k_turns=``, ``soak_sampler_kib_per_1k_turns=``: private memory growth per
  1,000 turns (a least-squares slope of USS over turns after the warm-up; goal: under 500 each);
- ``soak_web_kib_per_1k_turns_late=``: the web process's slope over the later half after the warm-up
  (a curve that levels off is flat there, a leak is not);
- ``soak_<process>_fds=``/``soak_<process>_threads=`` at the end and their change after warm-up;
- ``soak_redis_used_kib_delta=``, ``soak_redis_keys_delta=``, ``soak_db_kib_per_1k_turns=``,
  ``soak_log_kib_per_1k_turns=``; Redis's keys at the end by kind (``soak_redis_keys_kind=``: count /
  with a time to live) and ``soak_redis_keys_no_ttl=`` (keys that never expire);
- ``soak_ttft_p50_ms_w1=`` ... (median time to first text of the chat turns in each quarter after
  the warm-up), ``soak_web_uss_mib_w1=`` ... (the web process's private memory at each quarter's
  end) and the counts: ``soak_turns=``, ``soak_api_calls=``, ``soak_stops=``, ``soak_reconnects=``,
  ``soak_errors=``.

``QWENWEB_SOAK_S`` sets the time (default 600 s; 120 for a quick check), ``QWENWEB_SOAK_PEOPLE``
(default 6) and ``QWENWEB_SOAK_API_CLIENTS`` (default 2) the load; ``QWENWEB_SOAK_TOKENS`` the
answers' length (default 32).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

SOAK_S = float(os.environ.get("QWENWEB_SOAK_S", "600"))
PEOPLE = int(os.environ.get("QWENWEB_SOAK_PEOPLE", "6"))
API_CLIENTS = int(os.environ.get("QWENWEB_SOAK_API_CLIENTS", "2"))
TOKENS = int(os.environ.get("QWENWEB_SOAK_TOKENS", "32"))
SAMPLE_S = max(2.0, min(10.0, SOAK_S / 60))
WINDOWS = 4
API_MODEL = "chat-8k"  # the default profile's name, as the gateway takes it


class Tally:
    """What the load did, shared by its threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.turns = 0
        self.api_calls = 0
        self.stops = 0
        self.reconnects = 0
        self.errors: list[str] = []
        self.ttft: list[tuple[float, float]] = []  # (when, ms)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, count in counts.items():
                setattr(self, name, getattr(self, name) + count)

    @property
    def answers(self) -> int:
        return self.turns + self.api_calls


def person(index: int, tally: Tally, until: float) -> None:
    from tests.support.client import chat_socket, login, make_user, send

    chance = random.Random(index)
    http = login(make_user())
    conversation = None
    turns_on_socket = 0
    ws = chat_socket(http)
    try:
        while time.monotonic() < until:
            if turns_on_socket >= chance.randint(3, 6):  # the page closes and comes back
                ws.close()
                ws = chat_socket(http)
                tally.add(reconnects=1)
                turns_on_socket = 0
                if conversation:
                    send(ws, type="subscribe", conversation=conversation, history=True)
                    _until(ws, ("idle", "snapshot", "error"))
            if conversation is None or chance.random() < 0.25:
                conversation = None
            stop = chance.random() < 0.15
            options = {"seed": chance.randrange(2**31), "max_tokens": TOKENS, "temperature": 0.7}
            extra = {"conversation": conversation} if conversation else {}
            sent = time.monotonic()
            send(
                ws,
                type="send",
                text=f"Person {index}: tell me something about the number {sent:.0f}.",
                options=options,
                **extra,
            )
            first = None
            while True:
                event = json.loads(ws.recv(timeout=600))
                kind = event["type"]
                if kind == "accepted":
                    conversation = event["conversation"]
                elif kind == "token" and first is None:
                    first = time.monotonic()
                    with tally.lock:
                        tally.ttft.append((first, (first - sent) * 1000))
                    if stop:
                        send(ws, type="stop", conversation=conversation)
                elif kind == "error":
                    tally.errors.append(event.get("message", ""))
                    break
                elif kind == "done":
                    if event.get("status") == "stopped":
                        tally.add(stops=1)
                    elif event.get("status") != "complete":
                        tally.errors.append(f"{event.get('status')}: {event.get('error')}")
                    break
            tally.add(turns=1)
            turns_on_socket += 1
    finally:
        ws.close()
        http.close()


def _until(ws, kinds: tuple[str, ...]) -> None:
    while json.loads(ws.recv(timeout=120))["type"] not in kinds:
        pass


def api_client(index: int, key: str, tally: Tally, until: float) -> None:
    from tests.support.client import base_url

    with httpx.Client(base_url=base_url(), headers={"Authorization": f"Bearer {key}"}, timeout=600) as client:
        n = 0
        while time.monotonic() < until:
            n += 1
            body = {
                "model": API_MODEL,
                "messages": [{"role": "user", "content": f"Client {index} call {n}: name a colour."}],
                "max_tokens": TOKENS,
                "seed": n,
                "stream": n % 2 == 0,
            }
            try:
                if body["stream"]:
                    with client.stream("POST", "/v1/chat/completions", json=body) as response:
                        if response.is_error:
                            response.read()  # its body names the error
                        response.raise_for_status()
                        for _line in response.iter_lines():
                            pass
                else:
                    client.post("/v1/chat/completions", json=body).raise_for_status()
            except httpx.HTTPStatusError as error:
                tally.errors.append(
                    f"api {'stream' if body['stream'] else 'call'}: {error.response.status_code} {error.response.text[:300]}"
                )
            except httpx.HTTPError as error:
                tally.errors.append(f"api: {error!r}")
            tally.add(api_calls=1)


def log_bytes(run_dir: Path) -> int:
    """The programs' logs: the stack's ``NAME.log`` files and anything under ``log/``."""
    files = [*run_dir.glob("*.log"), *(run_dir / "log").rglob("*")]
    return sum(f.stat().st_size for f in files if f.is_file())


def sample(processes: dict[str, psutil.Process], redis_client, db: Path, logs: Path, tally: Tally) -> dict:
    row: dict = {"t": time.monotonic(), "answers": tally.answers}
    for name, process in processes.items():
        try:
            row[f"{name}_uss"] = process.memory_full_info().uss / 1024
            row[f"{name}_fds"] = process.num_fds()
            row[f"{name}_threads"] = process.num_threads()
        except psutil.Error:
            pass
    info = redis_client.info("memory")
    row["redis_used"] = info["used_memory"] / 1024
    row["redis_keys"] = redis_client.dbsize()
    # The database file itself: its WAL is checkpointed at 1,000 pages (about 4 MB) and stays that size.
    row["db"] = db.stat().st_size / 1024
    row["log"] = log_bytes(logs) / 1024
    return row


def redis_census(redis_client) -> str:
    """Redis's keys at the end by kind (their name up to the first id), and how many never expire:
    ``soak_redis_keys_kind=qwenweb:affinity:N/ttl,...`` (keys that expire are bounded by their time to
    live), ``soak_redis_keys_no_ttl=``."""
    kinds: dict[str, list[int]] = {}
    for key in redis_client.scan_iter(count=1000):
        name = key.decode(errors="replace")
        parts = [part for part in name.split(":") if not any(char.isdigit() for char in part)][:2]
        counts = kinds.setdefault(":".join(parts) or name[:16], [0, 0])
        counts[0] += 1
        counts[1] += redis_client.ttl(key) >= 0
    top = sorted(kinds.items(), key=lambda item: -item[1][0])[:8]
    listed = ",".join(f"{kind}:{count}/{expiring}" for kind, (count, expiring) in top)
    never = sum(count - expiring for count, expiring in kinds.values())
    return f"soak_redis_keys_kind={listed} soak_redis_keys_no_ttl={never}"


def slope_per_1k(rows: list[dict], field: str) -> float | None:
    """Least-squares growth of ``field`` per 1,000 answers over ``rows``."""
    points = [(row["answers"], row[field]) for row in rows if field in row]
    if len(points) < 2 or points[-1][0] == points[0][0]:
        return None
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return 1000 * sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-soak-", parallel=2)
    services = [stack.start_redis(run_dir)]
    try:
        llama = stack.start_llama(run_dir)
        services.append(llama)
        web = stack.start_web(run_dir)
        services.append(web)
        workers = stack.start_worker(run_dir)
        services.append(workers)
        celery = str(Path(sys.executable).parent / "celery")
        beat = stack.Service(
            "beat",
            [celery, "-A", "qwenweb", "beat", "--loglevel", "INFO", "--schedule", str(run_dir / "beat-schedule")],
            run_dir,
        )
        beat.start()
        services.append(beat)
        services.append(stack.start_sampler(run_dir))
        run(run_dir, web, workers, beat, services[-1])
    finally:
        for service in reversed(services):
            service.stop()


def run(run_dir: Path, web, workers, beat, sampler) -> None:
    import redis
    from django.conf import settings

    from chat.api.keys import create_key
    from tests.support.client import make_user

    processes = {
        "web": psutil.Process(web.process.pid),
        "worker": psutil.Process(workers.default.process.pid),
        "documents": psutil.Process(workers.documents.process.pid),
        "beat": psutil.Process(beat.process.pid),
        "sampler": psutil.Process(sampler.process.pid),
    }
    redis_client = redis.Redis.from_url(os.environ["REDIS_URL"])
    db = Path(settings.DATABASES["default"]["NAME"])
    tally = Tally()
    started = time.monotonic()
    until = started + SOAK_S
    warm_until = started + SOAK_S / 4
    threads = [threading.Thread(target=person, args=(i, tally, until), daemon=True) for i in range(PEOPLE)]
    for i in range(API_CLIENTS):
        _row, key = create_key(make_user(), f"soak {i}")
        threads.append(threading.Thread(target=api_client, args=(i, key, tally, until), daemon=True))
    for thread in threads:
        thread.start()
    rows = []
    while any(thread.is_alive() for thread in threads):
        rows.append(sample(processes, redis_client, db, run_dir, tally))
        time.sleep(SAMPLE_S)
    for thread in threads:
        thread.join()
    rows.append(sample(processes, redis_client, db, run_dir, tally))
    after = [row for row in rows if row["t"] >= warm_until] or rows[-2:]
    report(rows, after, list(processes), tally, warm_until, until)
    print(redis_census(redis_client))


def report(
    rows: list[dict], after: list[dict], names: list[str], tally: Tally, warm_until: float, until: float
) -> None:
    first, last = after[0], after[-1]
    figures: dict[str, object] = {}
    for name in names:
        slope = slope_per_1k(after, f"{name}_uss")
        figures[f"soak_{name}_kib_per_1k_turns"] = "n/a" if slope is None else round(slope)
    # The web process's growth in the later half after the warm-up: a curve that levels off (the C heap's
    # and Python's arenas reaching their high-water mark under this load) is flat here, a leak is not.
    late = [row for row in after if row["t"] >= (warm_until + until) / 2]
    slope = slope_per_1k(late, "web_uss")
    figures["soak_web_kib_per_1k_turns_late"] = "n/a" if slope is None else round(slope)
    for name in names:
        for kind in ("fds", "threads"):
            figures[f"soak_{name}_{kind}"] = last.get(f"{name}_{kind}")
            figures[f"soak_{name}_{kind}_delta"] = last.get(f"{name}_{kind}", 0) - first.get(f"{name}_{kind}", 0)
    figures["soak_redis_used_kib_delta"] = round(last["redis_used"] - first["redis_used"])
    figures["soak_redis_keys"] = last["redis_keys"]
    figures["soak_redis_keys_delta"] = last["redis_keys"] - first["redis_keys"]
    for field in ("db", "log"):
        slope = slope_per_1k(after, field)
        figures[f"soak_{field}_kib_per_1k_turns"] = "n/a" if slope is None else round(slope)
    window_s = (until - warm_until) / WINDOWS
    for window in range(WINDOWS):
        start = warm_until + window * window_s
        times = [ms for when, ms in tally.ttft if start <= when < start + window_s]
        figures[f"soak_ttft_p50_ms_w{window + 1}"] = round(statistics.median(times)) if times else "n/a"
        # The web process's private memory at the window's end: a line, or a curve that levels off.
        ending = [row["web_uss"] for row in after if "web_uss" in row and row["t"] < start + window_s]
        figures[f"soak_web_uss_mib_w{window + 1}"] = round(ending[-1] / 1024, 1) if ending else "n/a"
    figures.update(
        soak_turns=tally.turns,
        soak_api_calls=tally.api_calls,
        soak_turns_after_warmup=last["answers"] - first["answers"],
        soak_stops=tally.stops,
        soak_reconnects=tally.reconnects,
        soak_errors=len(tally.errors),
        soak_web_uss_mib=round(last.get("web_uss", 0) / 1024, 1),
    )
    for error in tally.errors[:5]:
        print(f"error: {error}")
    print(" ".join(f"{name}={value}" for name, value in figures.items()))


if __name__ == "__main__":
    main()
