"""The tool loop of a chat turn (issue 51): what the app adds to a tool step, whether the GPU waits on a
tool, and whether the resumed step finds its prompt in llama-server's cache.

The whole stack (Redis, the product's llama-server, a web process offering the test tools of
tests/support/tool_provider.py), the wired ``qwen35moe`` with Qwen3.5's own template; step limit 1,
so a tool turn is a model step, one tool call and the answer. The tool ``nap`` takes 5 s.

Prints
  tool_step_app_ms=          per tool step: the turn's time at the client less the tool's own time and
                             llama-server's (prompt + generation, every request), less the same for a
                             turn without tools (what any turn costs): parse, store, call, resume
  tool_slot_held_ms=         from the moment the page hears the 5 s tool runs, until the look that finds
                             llama-server's slots all idle and no grant of the pool's fair queue held
  (a resumed prompt of a few hundred tokens: the new tool messages are a large share of it, so the
  cached share of a real conversation's longer prompt is higher)
  tool_followup_cached_pct=  of the resumed request's prompt, the share llama-server took from its cache:
                             the first step's prompt and the call the model wrote (the wired model writes
                             it in its text's own tokens, as a trained model does, tests/support/qwen35.py)
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

RUNS = 3


def timed_turn(http, conversation, on_running=None) -> tuple[float, list[dict]]:
    from tests.support.client import chat_socket, send

    with chat_socket(http) as ws:
        began = time.monotonic()
        send(ws, type="send", conversation=str(conversation.id), text="Take a nap.")
        events = []
        while True:
            event = json.loads(ws.recv(timeout=600))
            events.append(event)
            if event["type"] == "tool" and event["step"]["state"] == "running" and on_running:
                on_running()
            if event["type"] in ("done", "error"):
                return (time.monotonic() - began) * 1000, events


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-tools-", parallel=2)
    services = [stack.start_redis(run_dir), stack.start_llama(run_dir)]
    llama = services[1]
    try:
        from chat.models import Conversation, Message
        from tests.support import queue_state
        from tests.support.client import login, make_user
        from tests.support.hold import read_queue
        from tests.support.profiles import live_id_here
        from tests.support.tool_provider import NAP_S
        from tests.support.tool_stack import tool_web_server, tools_profile

        with tool_web_server(run_dir, QWENWEB_TOOL_STEP_LIMIT="1"), tools_profile() as profile:
            user = make_user()
            http = login(user)

            def conversation(tools: bool) -> Conversation:
                return Conversation.objects.create(
                    owner=user, profile=profile, title="tool:nap", tools_enabled=tools, thinking_enabled=False
                )

            def held_ms() -> None:
                """Until the start of the first look that finds all free (0: free at the first look; a
                look, an HTTP call and a Redis read, takes tens of ms itself)."""
                began = look = time.monotonic()
                while any(s["is_processing"] for s in llama.slots(live_id_here(profile))) or read_queue(
                    profile.name, lambda queue: queue_state.active_count(queue)
                ):
                    time.sleep(0.005)
                    look = time.monotonic()
                holds.append((look - began) * 1000)

            def answer_stats(events: list[dict]) -> dict:
                assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
                return events[-1]["stats"]

            timed_turn(http, conversation(True))  # warm-up: the template, the grammar, the web process
            app, holds, cached = [], [], []
            for _run in range(RUNS):
                plain_ms, plain_events = timed_turn(http, conversation(False))
                plain_app = plain_ms - answer_stats(plain_events)["model_ms"]
                tool_ms, tool_events = timed_turn(http, conversation(True), held_ms)
                stats = answer_stats(tool_events)
                step = Message.objects.filter(role="assistant").latest("id").tool_steps[0]
                assert step["state"] == "done" and step["ms"] >= NAP_S * 1000, step
                app.append((tool_ms - step["ms"] - stats["model_ms"] - plain_app) / stats["tool_steps"])
                followup = stats["followup"]
                total = followup["prompt_tokens"] + followup["cached_tokens"]
                cached.append(100 * followup["cached_tokens"] / total if total else 0)
                # The first step's prompt (every step's prompt tokens less the follow-up's).
                first = stats["prompt_tokens"] + stats["cached_tokens"] - total
                print(
                    f"run {_run + 1}: app {app[-1]:.1f} ms, held {holds[-1]:.1f} ms, cached {cached[-1]:.1f}% "
                    f"({followup['cached_tokens']} of {total}; the first step's prompt {first})"
                )
        print(f"tool_step_app_ms={statistics.median(app):.1f}")
        print(f"tool_slot_held_ms={statistics.median(holds):.1f}")
        print(f"tool_followup_cached_pct={statistics.median(cached):.1f}")
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    main()
