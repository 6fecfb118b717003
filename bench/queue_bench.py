"""What a chat turn asks llama-server before its answer, and what waiting in line costs the web process.

One stack (Redis, llama-server under its supervisor, Daphne); the web process reaches llama-server
through a counting relay (every request to llama-server is one connection: the relay reads its
request line and passes the bytes on), the node's heartbeat does not (it talks to its router directly).

Prints:
- ``turn_upstream_requests=``: requests the web process sends to llama-server from a chat message to
  its first token, in a warm conversation (the median of several follow-ups; goal 1: the answer's own),
  and ``turn_upstream_paths=`` (what they were);
- ``queue_wait_cpu_ms_per_s=``: the web process's CPU per second while 10 turns wait in line behind
  2 busy slots (the slots held by the test's hold, as a running answer would hold them).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

FOLLOW_UPS = 5
WAITERS = 10
WAIT_MEASURE_S = 10.0


class CountingRelay:
    """A TCP relay in front of llama-server that notes each request line it passes on."""

    def __init__(self, target: str):
        parts = urlsplit(target)
        self.target = (parts.hostname, parts.port)
        self.port = stack.free_port()
        self.lines: list[str] = []
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _serve(self) -> None:
        await asyncio.start_server(self._relay, "127.0.0.1", self.port)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        first = await reader.readline()
        self.lines.append(first.decode("latin-1").split(" HTTP/")[0])
        upstream_writer.write(first)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except ConnectionError:
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


def requests_before_first_token(ws, relay: CountingRelay, text: str) -> list[str]:
    from tests.support.client import send

    relay.lines.clear()
    send(ws, type="send", text=text, options={"seed": 3, "max_tokens": 8})
    seen: list[str] | None = None
    while True:
        event = json.loads(ws.recv(timeout=300))
        if event["type"] == "token" and seen is None:
            seen = list(relay.lines)
        if event["type"] in ("done", "error"):
            assert event.get("status") == "complete", event
            return seen or []


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-queue-bench-")
    services = [stack.start_redis(run_dir), stack.start_llama(run_dir)]
    relay = CountingRelay(os.environ["LLAMA_SERVER_URL"])
    real_url = os.environ["LLAMA_SERVER_URL"]
    os.environ["LLAMA_SERVER_URL"] = relay.url  # the web process's view; the supervisor runs on the real one
    try:
        services.append(stack.start_web(run_dir))
    finally:
        os.environ["LLAMA_SERVER_URL"] = real_url
    try:
        from monitor.profiles.selectors import find_profile
        from tests.support import queue_state
        from tests.support.client import chat_socket, events_until, login, make_user, send
        from tests.support.hold import queue_slots_held, read_queue

        with chat_socket(login(make_user())) as ws:
            requests_before_first_token(ws, relay, "Say hello.")  # the conversation starts, caches warm
            counts, paths = [], Counter()
            for round_ in range(FOLLOW_UPS):
                seen = requests_before_first_token(ws, relay, f"And once more ({round_}).")
                counts.append(len(seen))
                paths.update(seen)
        print(f"turn_upstream_requests={statistics.median(counts):g}")
        print("turn_upstream_paths=" + ",".join(f"{path.replace(' ', '_')}:{n}" for path, n in sorted(paths.items())))

        name = find_profile(None).name
        web = psutil.Process(services[-1].process.pid)
        with queue_slots_held(name, 2):
            sockets = []
            for index in range(WAITERS):
                socket = chat_socket(login(make_user()))
                send(socket, type="send", text=f"Wait in line ({index}).", options={"max_tokens": 4})
                events_until(socket, "queued")
                sockets.append(socket)
            assert read_queue(name, lambda queue: queue_state.waiting_count(queue)) == WAITERS
            before, started = cpu_s(web), time.monotonic()
            time.sleep(WAIT_MEASURE_S)
            used, elapsed = cpu_s(web) - before, time.monotonic() - started
        print(f"queue_wait_cpu_ms_per_s={used * 1000 / elapsed:.2f}")
        for socket in sockets:
            events_until(socket)
            socket.close()
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    main()
