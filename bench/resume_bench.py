"""An answer that outlives its node (issue 52), on a two-node loopback stack (the main box and a second
node, tests/support/nodes.py, as bench/pool_bench.py builds it). Each round streams a long answer on the
second node (the main box's slot held until the cut), then:

- kills the second node's router (SIGKILL) and frees the main box's slot: ``resume_gap_s=`` is the
  median time from the kill to the next token the person sees; goal <= 3;
- ``resume_complete_pct=``: answers cut by a kill that finished on the other node; goal 100;
- ``resume_bad_chars=``: characters doubled or lost (the stored answer against what the page was sent);
  goal 0;
- freezes the second node's router (SIGSTOP) with the profile's hang limit far away: ``freeze_release_s=``
  is the median time from the freeze to the answer's "resumed" event, which only the pool marking the
  node out can cause; goal <= 5 (22 before).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("QWENWEB_MODELS_MAX", "3")

from bench.pool_bench import load_everywhere, pool_profile  # noqa: E402
from tests.support import stack  # noqa: E402

ROUNDS = int(os.environ.get("RESUME_BENCH_ROUNDS", "3"))
ANSWER = {"seed": 3, "max_tokens": 160}


def one_cut(profile, second, freeze: bool) -> tuple[float, bool, int]:
    """(seconds from the cut to the next token, or to "resumed" when frozen; complete; bad characters)."""
    from django.conf import settings

    from chat.models import Message
    from tests.support.client import chat_socket, login, make_user, send
    from tests.support.hold import node_slots_held

    holder = node_slots_held(profile.name, [settings.NODE_NAME], "bench-holder")  # the answer goes to node-b
    ws = chat_socket(login(make_user()))
    send(ws, type="send", text="Write a very long story.", options=ANSWER, profile=profile.name)
    events = []
    while (event := json.loads(ws.recv(timeout=600)))["type"] != "token":
        events.append(event)
    events.append(event)
    router = second.router_pid()
    cut = time.perf_counter()
    os.kill(router, signal.SIGSTOP if freeze else signal.SIGKILL)
    holder.release()
    gap = None
    try:
        while (event := json.loads(ws.recv(timeout=600)))["type"] not in ("done", "error"):
            events.append(event)
            wanted = "resumed" if freeze else "token"
            if gap is None and event["type"] == wanted:
                gap = time.perf_counter() - cut
    finally:
        if freeze:
            os.kill(router, signal.SIGCONT)
    ws.close()
    accepted = next(e for e in events if e["type"] == "accepted")
    stored = Message.objects.get(id=accepted["assistant_message"]["id"])
    shown = "".join(e["text"] for e in events if e["type"] == "token")
    bad = abs(len(stored.content) - len(shown)) + (0 if stored.content == shown else 1)
    return (gap if gap is not None else float("nan")), event.get("status") == "complete", bad


def back(second, profile) -> None:
    """node-b serving the pool again: its supervisor restarted the router; its worker loads the profile."""
    from monitor.serving.slot import load_on_nodes
    from tests.support.stack import wait_until

    def loaded() -> bool:
        try:
            return bool(asyncio.run(load_on_nodes(profile, [second.name])))
        except Exception:  # the router still starting: its load is sent again
            return False

    wait_until(loaded, 300, "node-b back")


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-resume-bench-", parallel=2)
    from django.core.management import call_command

    from monitor.models import ServerProfile
    from monitor.nodes.registry import local_node
    from tests.support.nodes import SecondNode

    services = [stack.start_redis(run_dir)]
    services += [stack.start_llama(run_dir), stack.start_web(run_dir), stack.start_worker(run_dir)]
    second = SecondNode(run_dir, "node-b")
    second.start()
    services.append(second)
    try:
        call_command("register_node")  # the main box's model hashes, as `make run` registers them
        nodes = [local_node().name, second.name]
        profile = pool_profile("pool-resume", 1, nodes, "--ignore-eos")
        load_everywhere(profile, nodes)
        gaps, complete, bad = [], 0, 0
        for _round in range(ROUNDS):
            gap, done, wrong = one_cut(profile, second, freeze=False)
            gaps.append(gap)
            complete += done
            bad += wrong
            back(second, profile)
        ServerProfile.objects.filter(pk=profile.pk).update(hang_limit_s=3600)
        releases = []
        for _round in range(ROUNDS):
            release, done, wrong = one_cut(profile, second, freeze=True)
            releases.append(release)
            bad += wrong
            back(second, profile)
        print(f"resume_gap_s={statistics.median(gaps):.2f}")
        print(f"resume_complete_pct={100 * complete / ROUNDS:.0f}")
        print(f"resume_bad_chars={bad}")
        print(f"freeze_release_s={statistics.median(releases):.2f}")
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    main()
