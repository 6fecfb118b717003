"""Two nodes behind one chat: throughput against the two llama-servers directly, follow-ups' affinity,
and a node's failover, on a two-node loopback stack.

The main box (Redis, its llama-server supervisor and router, Daphne, a worker) and a second node on
this machine (tests/support/nodes.py: its own supervisor, router, worker, var folder and key) serve
pool profiles placed on both. Prints:

- ``pool_ratio=``: tokens/s of 4 concurrent streams through the app (the OpenAI gateway) over the two
  nodes, divided by the same 4 streams sent straight to the two llama-servers (2 each), alternating,
  the median of the rounds (``pool_app_tps=``, ``pool_direct_tps=``); goal >= 0.97;
- ``pool_affinity_pct=``: follow-ups (4 people x 3 rounds, conversations of about 3000 tokens, one slot
  per node) served by the node that served their conversation last; goal >= 95;
  ``pool_followup_cached_pct=``: the share of those follow-ups' prompt tokens llama-server took from
  its cache; goal >= 90;
- ``node_failover_s=``: from killing the second node's router (an answer streaming on it) to the first
  token of the next answer, from the other node; goal <= 5. The cut answer goes on first on that node's
  one slot (issue 52; ``node_failover_resumed_s=``: until it does), so it is kept short (120 tokens);
- ``node_lost_messages=``: messages gone or doubled after it (each turn stored once with one answer); goal 0.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("QWENWEB_MODELS_MAX", "3")  # both pool profiles and the default beside each other

from tests.support import stack  # noqa: E402

ROUNDS = 3
STREAM_TOKENS = 192
PEOPLE, TURNS = 4, 3
LOG_LINE = "Keeper %d, night %d: lamp lit at dusk, wind from the west, two ships passed, the fog horn sounded twice."


def stream_tokens(client: httpx.Client, path: str, body: dict) -> tuple[float, float, int]:
    """(start, end, content events) of one streamed chat completion."""
    started = time.perf_counter()
    tokens = 0
    with client.stream("POST", path, json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: {") and '"content":"' in line:
                tokens += 1
    return started, time.perf_counter(), tokens


def concurrent_tps(jobs: list[tuple[httpx.Client, dict]]) -> float:
    """Tokens/s of the jobs run at once: every token over the span from the first start to the last end."""
    results: list[tuple[float, float, int]] = []

    def run(client: httpx.Client, body: dict) -> None:
        try:
            results.append(stream_tokens(client, "/v1/chat/completions", body))
        except BaseException as error:  # counted below as a failed stream
            print(f"stream failed: {error!r}", flush=True)

    threads = [threading.Thread(target=run, args=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert len(results) == len(jobs), "a stream failed"
    start, end = min(r[0] for r in results), max(r[1] for r in results)
    return sum(r[2] for r in results) / (end - start)


def pool_profile(name: str, parallel: int, nodes: list[str], extra_args: str = ""):
    from monitor.models import Node, Placement, ServerProfile
    from monitor.profiles.services import save_profile
    from monitor.profiles.validation import validate_profile

    default = ServerProfile.objects.get(is_default=True)
    profile = ServerProfile(
        name=name, model_file=default.model_file, chat_template_jinja=default.chat_template_jinja,
        ctx_size=8192 * parallel, parallel=parallel, threads=1, extra_args=extra_args,
    )  # fmt: skip
    validate_profile(profile)
    save_profile(profile)
    for node in Node.objects.filter(name__in=nodes):
        Placement.objects.get_or_create(profile=profile, node=node)
    return profile


def load_everywhere(profile, nodes: list[str]) -> dict:
    from monitor.nodes import readiness
    from monitor.serving.slot import load_on_nodes

    asyncio.run(load_on_nodes(profile, nodes))
    stack.wait_until(lambda: len(asyncio.run(readiness.served_on(nodes, profile.name))) == 2, 300, profile.name)
    return asyncio.run(readiness.served_on(nodes, profile.name))


def measure_ratio(profile, served: dict, second, llama) -> tuple[float, float, float]:
    from chat.api.keys import create_key
    from tests.support.client import base_url, make_user

    _row, key = create_key(make_user(), "pool-bench")
    # A client of its own for each stream, on both paths: the bench's reading is the same either way.
    apps = [
        httpx.Client(base_url=base_url(), headers={"Authorization": f"Bearer {key}"}, timeout=600) for _ in range(4)
    ]
    keys = {llama.url: llama.headers["Authorization"], second.url: f"Bearer {second.key}"}
    routers = [
        (url, httpx.Client(base_url=url, headers={"Authorization": keys[url]}, timeout=600))
        for url in [llama.url, second.url] * 2
    ]
    from django.conf import settings

    ids = {llama.url: served[settings.NODE_NAME][1], second.url: served[second.name][1]}

    def body(model: str, index: int) -> dict:
        prompt = f"Write a long story about lighthouse number {index}."
        return {
            "model": model, "messages": [{"role": "user", "content": prompt}], "stream": True,
            "seed": 100 + index, "max_tokens": STREAM_TOKENS, "temperature": 0.7, "cache_prompt": False,
        }  # fmt: skip

    app_runs, direct_runs = [], []
    for round_ in range(ROUNDS):
        app_job = lambda: concurrent_tps([(app, body(profile.name, i)) for i, app in enumerate(apps)])  # noqa: E731
        direct_job = lambda: concurrent_tps(  # noqa: E731
            [(client, body(ids[url], i)) for i, (url, client) in enumerate(routers)]
        )
        for kind, job in ([("app", app_job), ("direct", direct_job)] if round_ % 2 == 0 else
                          [("direct", direct_job), ("app", app_job)]):  # fmt: skip
            (app_runs if kind == "app" else direct_runs).append(job())
        print(f"round {round_}: app {app_runs[-1]:.1f} tokens/s, direct {direct_runs[-1]:.1f}", flush=True)
    return (
        statistics.median(app_runs),
        statistics.median(direct_runs),
        statistics.median(a / d for a, d in zip(app_runs, direct_runs, strict=True)),
    )


def grants(pool: str) -> list:
    from monitor.redis_clients import close_loop_clients
    from monitor.serving.queue import FairQueue
    from tests.support import queue_state

    async def read():
        queue = FairQueue(pool)
        try:
            return await queue_state.grants(queue)
        finally:
            await close_loop_clients()

    return asyncio.run(read())


def ask(ws, text: str, profile: str, conversation: str | None) -> tuple[dict, dict]:
    from tests.support.client import send

    payload = {"type": "send", "text": text, "options": {"seed": 9, "max_tokens": 24}, "profile": profile}
    if conversation:
        payload["conversation"] = conversation
    send(ws, **payload)
    accepted = None
    while True:
        event = json.loads(ws.recv(timeout=600))
        if event["type"] == "accepted":
            accepted = event
        if event["type"] in ("done", "error"):
            return accepted, event


def measure_affinity(profile) -> tuple[float, float]:
    """4 people x 3 rounds at once on one slot per node: which node each follow-up got, and its cache."""
    from tests.support.client import chat_socket, login, make_user

    opening = "Here is the keepers' log:\n" + "\n".join(LOG_LINE % (k, n) for k in range(1, 11) for n in range(1, 11))
    follow_ups: list[tuple[str, str, dict]] = []  # (node before, node now, stats)
    lock = threading.Lock()

    sessions = [login(make_user()) for _ in range(PEOPLE)]  # made here: the threads only chat
    failures: list[BaseException] = []

    def person(index: int) -> None:
        try:
            chat(index)
        except BaseException as error:  # reported below: a thread's failure must not pass unseen
            failures.append(error)

    def chat(index: int) -> None:
        with chat_socket(sessions[index]) as ws:
            accepted, done = ask(ws, opening + f"\nWhich keeper is number {index}?", profile.name, None)
            conversation = accepted["conversation"]
            node = node_of(accepted["assistant_message"]["id"])
            for round_ in range(TURNS):
                accepted, done = ask(ws, f"And on night {round_ + 2}?", profile.name, conversation)
                now = node_of(accepted["assistant_message"]["id"])
                with lock:
                    follow_ups.append((node, now, done["stats"]))
                node = now

    threads = [threading.Thread(target=person, args=(index,)) for index in range(PEOPLE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(1800)
    if failures:
        raise failures[0]
    kept = sum(1 for before, now, _stats in follow_ups if before == now)
    cached = sum(int(stats.get("cached_tokens") or 0) for _b, _n, stats in follow_ups)
    processed = sum(int(stats.get("prompt_tokens") or 0) for _b, _n, stats in follow_ups)
    return 100 * kept / len(follow_ups), 100 * cached / max(1, cached + processed)


_answer_nodes: dict[int, str] = {}


def node_of(message_id: int) -> str:
    """The node that served an answer: the grant its turn got, from the queue's log (read by the turn's
    owner and time, the latest grant before the answer's row was written)."""
    from chat.models import Message

    message = Message.objects.select_related("conversation").get(id=message_id)
    owner = str(message.conversation.owner_id)
    made_ms = message.created_at.timestamp() * 1000
    candidates = [g for g in grants(message.conversation.profile.name) if g.user == owner and g.at_ms >= made_ms - 50]
    return candidates[0].node if candidates else "?"


def measure_failover(profile, second) -> tuple[float, int]:
    from django.conf import settings

    from chat.models import Message
    from monitor.redis_clients import close_loop_clients
    from monitor.serving.queue import FairQueue
    from tests.support.client import chat_socket, login, make_user, send
    from tests.support.hold import held_slot

    held, release = threading.Event(), threading.Event()

    async def hold_main() -> None:  # the main node's slot busy: the first answer goes to the second node
        queue = FairQueue(profile.name)
        async with held_slot(queue, "bench-holder", [settings.NODE_NAME]):
            held.set()
            await asyncio.to_thread(release.wait)
        await close_loop_clients()

    threading.Thread(target=asyncio.run, args=(hold_main(),), daemon=True).start()
    held.wait(60)
    streaming = chat_socket(login(make_user()))
    send(
        streaming,
        type="send",
        text="Write a very long story.",
        options={"seed": 3, "max_tokens": 120},  # about 3 s: then the one slot left is the next question's
        profile=profile.name,
    )
    while (event := json.loads(streaming.recv(timeout=600)))["type"] != "token":
        assert event["type"] not in ("done", "error"), event
    release.set()

    resumed: list[float] = []

    def drain() -> None:  # the cut answer goes on on the main node (issue 52): read as a page does
        while (event := json.loads(streaming.recv(timeout=600)))["type"] not in ("done", "error"):
            if event["type"] == "resumed" and not resumed:
                resumed.append(time.perf_counter())

    draining = threading.Thread(target=drain, daemon=True)
    draining.start()
    other = chat_socket(login(make_user()))
    killed = time.perf_counter()
    second.kill_router()
    send(other, type="send", text="Say hi.", options={"seed": 3, "max_tokens": 8}, profile=profile.name)
    first_token = None
    while True:
        event = json.loads(other.recv(timeout=600))
        if event["type"] == "token" and first_token is None:
            first_token = time.perf_counter()
        if event["type"] in ("done", "error"):
            break
    draining.join(600)
    streaming.close()
    other.close()
    lost = 0
    for conversation in {m.conversation_id for m in Message.objects.filter(created_at__gte=_since)}:
        roles = list(Message.objects.filter(conversation_id=conversation).values_list("role", "status"))
        users = sum(1 for role, _status in roles if role == "user")
        answers = sum(1 for role, status in roles if role == "assistant" and status != "streaming")
        lost += abs(users - answers)
    print(f"node_failover_resumed_s={f'{resumed[0] - killed:.2f}' if resumed else 'n/a (not cut)'}", flush=True)
    return (first_token or time.perf_counter()) - killed, lost


_since = None


def main() -> None:
    global _since
    run_dir = stack.django_run_dir("qwenweb-pool-bench-", parallel=2)
    from django.utils import timezone

    from monitor.nodes.registry import local_node
    from tests.support.nodes import SecondNode

    services = [stack.start_redis(run_dir)]
    llama = stack.start_llama(run_dir)
    services += [llama, stack.start_web(run_dir), stack.start_worker(run_dir)]
    second = SecondNode(run_dir, "node-b")
    second.start()
    services.append(second)
    try:
        nodes = [local_node().name, second.name]
        wide = pool_profile("pool-two-slots", 2, nodes)
        served = load_everywhere(wide, nodes)
        app_tps, direct_tps, ratio = measure_ratio(wide, served, second, llama)
        print(f"pool_app_tps={app_tps:.1f} pool_direct_tps={direct_tps:.1f}")
        print(f"pool_ratio={ratio:.3f}")
        # Answers run to their max_tokens (the failover's answer is still streaming when its node is killed).
        narrow = pool_profile("pool-one-slot", 1, nodes, "--ignore-eos")
        load_everywhere(narrow, nodes)
        affinity, cached = measure_affinity(narrow)
        print(f"pool_affinity_pct={affinity:.1f}")
        print(f"pool_followup_cached_pct={cached:.1f}")
        _since = timezone.now()
        failover_s, lost = measure_failover(narrow, second)
        print(f"node_failover_s={failover_s:.2f}")
        print(f"node_lost_messages={lost}")
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    main()
