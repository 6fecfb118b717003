"""Streaming through the app versus llama-server directly, in one run.

Prints per-run figures, then `stream_ratio=` (app tokens/s ÷ direct tokens/s,
medians) and `ttft_added_ms=` (p50 app TTFT − p50 direct TTFT; also printed as
`chat_ttft_added_ms=`, the name the gateway's figure is told apart from) on its last line.
A second part has 8 people chatting at once against --parallel 2; a third prints
`reattach_ms=`: p50 time from opening a conversation with a running answer on a fresh
socket to the first live token on it.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

RUNS = 7
REATTACH_RUNS = 7
PROMPT = "Write a story about a lighthouse keeper and a storm."
OPTIONS = {"seed": 1234, "max_tokens": 128, "temperature": 0.7}


def timed_stream(client: httpx.Client, path: str, body: dict) -> tuple[float, float, int, float]:
    """(ttft ms, tokens/s as received, tokens, llama-server's own tokens/s) of one streamed request."""
    try:
        return _timed_stream(client, path, body)
    except httpx.RemoteProtocolError:
        # A kept-alive connection the server closed while idle (a slow run on a busy box): retry on a new one.
        return _timed_stream(client, path, body)


def _timed_stream(client: httpx.Client, path: str, body: dict) -> tuple[float, float, int, float]:
    started = time.perf_counter()
    first = last = None
    tokens, server_tps = 0, 0.0
    with client.stream("POST", path, json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(chunk["error"])
            if chunk.get("timings"):
                server_tps = chunk["timings"]["predicted_per_second"]
            for choice in chunk.get("choices") or ():
                if (choice.get("delta") or {}).get("content"):
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    tokens += 1
    return (first - started) * 1000, (tokens - 1) / (last - first), tokens, server_tps


def direct_run(client: httpx.Client, model_id: str) -> tuple[float, float, int, float]:
    # Straight to llama-server (its router, the model id of the default profile), as any client would.
    body = {"model": model_id, "messages": [{"role": "user", "content": PROMPT}], "stream": True, **OPTIONS}
    return timed_stream(client, "/v1/chat/completions", body)


def app_run(ws) -> tuple[float, float, int, float]:
    from tests.support.client import send

    started = time.perf_counter()
    send(ws, type="send", text=PROMPT, options=OPTIONS)
    first = last = None
    while True:
        event = json.loads(ws.recv(timeout=120))
        if event["type"] == "token":
            now = time.perf_counter()
            first = first or now
            last = now
        elif event["type"] in ("done", "error"):
            assert event.get("status") == "complete", event
            # One event can carry several tokens when the page falls behind; count llama-server's tokens.
            tokens = event["stats"]["output_tokens"]
            server_tps = event["stats"]["tokens_per_second"]
            break
    return (first - started) * 1000, (tokens - 1) / (last - first), tokens, server_tps


def reattach_run(http, ws) -> float | None:
    """ms from opening a fresh socket on a conversation whose answer runs to its first live token;
    None when the answer ended before one came (not counted)."""
    from tests.support.client import chat_socket, events_until, send

    send(ws, type="send", text=PROMPT, options={**OPTIONS, "max_tokens": 256})
    conversation = events_until(ws, "accepted")[-1]["conversation"]
    while json.loads(ws.recv(timeout=120))["type"] != "token":
        pass
    started = time.perf_counter()
    took = None
    with chat_socket(http) as fresh:
        send(fresh, type="subscribe", conversation=conversation)
        seen = 0
        while True:
            event = json.loads(fresh.recv(timeout=120))
            if event["type"] == "snapshot":
                seen = event["seq"]
            elif event["type"] == "token" and event["seq"] > seen:
                took = (time.perf_counter() - started) * 1000
                break
            elif event["type"] in ("done", "idle", "error"):
                break
        send(fresh, type="stop", conversation=conversation)
    events_until(ws)
    return took


def concurrent_part(results: dict) -> None:
    """8 people at once against 2 slots, one of them sending a burst (as many as a person may have
    in flight, CHAT_TURNS_IN_FLIGHT: a third would be refused, by design).

    Two other people's long answers hold both slots first, so every message waits in
    line; fair means each single-message person starts before the burst's 2nd message.
    """
    from django.conf import settings

    from chat.models import Message
    from tests.support.client import chat_socket, login, make_user, send

    burst = settings.CHAT_TURNS_IN_FLIGHT

    people = [make_user() for _ in range(8)]
    sessions = [login(p) for p in people]
    outcomes: list[dict] = []
    lock = threading.Lock()
    sockets = [chat_socket(s) for s in sessions]

    holder_sockets = [chat_socket(login(make_user())) for _ in range(2)]

    def hold_slot(ws):
        send(ws, type="send", text="Tell a very long tale.", options={"seed": 5, "max_tokens": 160})
        while json.loads(ws.recv(timeout=300))["type"] not in ("done", "error"):
            pass

    def chat(index: int, count: int) -> None:
        ws = sockets[index]
        for n in range(count):
            send(
                ws,
                type="send",
                text=f"Person {index} message {n}: tell me about the moon.",
                options={"seed": index, "max_tokens": 32},
            )
        finished = 0
        tokens: dict[int, list[str]] = {}
        started_at: dict[int, float] = {}
        while finished < count:
            event = json.loads(ws.recv(timeout=300))
            if event["type"] == "started":
                started_at[event["message"]] = time.perf_counter()
            elif event["type"] == "token":
                tokens.setdefault(event["message"], []).append(event["text"])
            elif event["type"] in ("done", "error"):
                finished += 1
                with lock:
                    outcomes.append(
                        {
                            "person": index,
                            "message": event.get("message"),
                            "status": event.get("status"),
                            "text": "".join(tokens.get(event.get("message"), [])),
                            "started": started_at.get(event.get("message"), float("inf")),
                        }
                    )

    holders = [threading.Thread(target=hold_slot, args=(ws,)) for ws in holder_sockets]
    for thread in holders:
        thread.start()
    time.sleep(0.5)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=chat, args=(0, burst))]
    threads[0].start()
    time.sleep(0.3)  # the burst is in line first
    threads += [threading.Thread(target=chat, args=(i, 1)) for i in range(1, 8)]
    for thread in threads[1:]:
        thread.start()
    for thread in threads + holders:
        thread.join()
    elapsed = time.perf_counter() - t0
    for ws in sockets + holder_sockets:
        ws.close()
    delivered = 0
    for o in outcomes:  # what was not delivered: a refusal's text, or what was streamed beside what was stored
        stored = (
            Message.objects.filter(id=o["message"]).values_list("content", flat=True).first() if o["status"] else None
        )
        if o["status"] == "complete" and stored == o["text"]:
            delivered += 1
        else:
            print(
                f"not delivered: person {o['person']} {o['status'] or o['message']!r}: {o['text'][-60:]!r} {stored!r}"
            )
    burst_starts = sorted(o["started"] for o in outcomes if o["person"] == 0)
    singles_last = max(o["started"] for o in outcomes if o["person"] != 0)
    results.update(
        concurrent_messages=len(outcomes),
        concurrent_delivered=delivered,
        concurrent_lost=len(outcomes) - delivered + (burst + 7 - len(outcomes)),
        concurrent_wall_s=round(elapsed, 1),
        fair_order="yes" if singles_last < burst_starts[1] else "no",
    )


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-", parallel=2)
    services = [stack.start_redis(run_dir)]
    llama = stack.start_llama(run_dir)
    services += [llama, stack.start_web(run_dir)]
    try:
        from tests.support.client import chat_socket, login, make_user

        key = llama.env["LLAMA_API_KEY"]
        # A kept-alive client, as the app has: the reference carries no per-request set-up either.
        direct_client = httpx.Client(base_url=llama.url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
        http = login(make_user())
        direct, app = [], []
        with chat_socket(http) as ws:
            direct_run(direct_client, llama.model_id), app_run(ws)  # warm-up
            for run in range(RUNS):
                direct.append(direct_run(direct_client, llama.model_id))
                app.append(app_run(ws))
                print(
                    f"run {run + 1}: direct ttft={direct[-1][0]:.1f}ms {direct[-1][1]:.1f} tok/s ({direct[-1][2]} tokens) | "
                    f"app ttft={app[-1][0]:.1f}ms {app[-1][1]:.1f} tok/s ({app[-1][2]} tokens)"
                )
            reattach = [took for took in (reattach_run(http, ws) for _ in range(REATTACH_RUNS)) if took is not None]
        results: dict = {}
        concurrent_part(results)
        print(" ".join(f"{k}={v}" for k, v in results.items()))
        ratio = statistics.median(a[1] for a in app) / statistics.median(d[1] for d in direct)
        added = statistics.median(a[0] for a in app) - statistics.median(d[0] for d in direct)
        print(
            f"direct_tps={statistics.median(d[1] for d in direct):.1f} app_tps={statistics.median(a[1] for a in app):.1f}"
        )
        # llama-server's own generation speed for each path's requests: when these differ too, the
        # gap is CPU taken from generation on a small machine, not delivery.
        print(
            f"server_tps_direct={statistics.median(d[3] for d in direct):.1f} "
            f"server_tps_app={statistics.median(a[3] for a in app):.1f}"
        )
        print(f"reattach_ms={statistics.median(reattach):.1f} reattach_runs={len(reattach)}")
        print(f"stream_ratio={ratio:.3f} ttft_added_ms={added:.1f} chat_ttft_added_ms={added:.1f}")
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    main()
