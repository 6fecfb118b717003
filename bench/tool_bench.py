"""The tool loop of a chat turn (issue 51): what the app adds to a tool step, whether the GPU waits on a
tool, and whether the resumed step finds its prompt in llama-server's cache.

The whole stack (Redis, the product's llama-server, a web process offering the test tools of
tests/support/tool_provider.py), the wired ``qwen35moe`` with Qwen3.5's own template; step limit 1,
so a tool turn is a model step, one tool call and the answer. The tool ``nap`` takes 5 s.

Prints
  tool_step_app_ms=          per tool step: the turn's time at the client less the tool's own time and
                             llama-server's, less the same for a turn without tools (what any turn
                             costs): parse, store, call, resume. llama-server's time is all of it:
                             prompt and generation (its timings, every request) and, for each request,
                             its time outside them (the template with the tools, their grammar, HTTP),
                             measured by the same requests sent to it directly (the reference)
  tool_step_turn_added_ms=   the same without that reference (llama-server's time outside its timings
                             counted as the app's, as this bench printed before)
  tool_step_llama_outside_ms= that difference: the tool turn's two requests' time outside llama-server's
                             timings less the plain turn's one, sent directly
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
QUESTION = "Take a nap."


def outside_timings_ms(client, llama, body: dict) -> float:
    """A request sent straight to llama-server, streamed as the app streams it: its time at this client
    less llama-server's prompt and generation timings (the bytes read raw, only the last event parsed;
    ``client``: one httpx client made before, so its making is not counted)."""
    began = time.perf_counter()
    tail = b""
    headers = {**llama.headers, "Connection": "close"}  # a connection per request, as the app's transport
    with client.stream("POST", llama.url + "/v1/chat/completions", json=body, headers=headers) as r:
        for data in r.iter_raw():
            tail = (tail + data)[-8192:]
    wall = (time.perf_counter() - began) * 1000
    events = [line[6:] for line in tail.split(b"\n") if line.startswith(b"data: {")]
    timings = json.loads(events[-1])["timings"]
    return wall - timings["prompt_ms"] - timings["predicted_ms"]


def reference_ms(llama, model: str, tools: list[dict], step: dict) -> float:
    """What llama-server's time outside its timings adds to a tool turn (its two requests) over a plain
    turn (one), the same bodies as the app's (chat/conversations/turns.py, chat/tools/loop.py) sent directly:
    the follow-up, past the step limit (1), with ``tool_choice`` none, as the loop sends it."""
    import httpx

    from chat.tools.calls import ToolCall
    from chat.tools.loop import step_messages

    asked = [{"role": "user", "content": QUESTION}]
    base = {
        "model": model,
        "max_tokens": 256,
        "return_progress": True,
        "reasoning_format": "deepseek",
        "chat_template_kwargs": {"enable_thinking": False},
        "reasoning_effort": "none",
        "stream": True,
    }
    with_tools = {**base, "tools": tools, "parallel_tool_calls": False, "cache_prompt": True}
    call = ToolCall(id="call_nap", name=step["name"], arguments=step["arguments"])
    followup = [*asked, *step_messages("", "", call, step["result"])]
    with httpx.Client(timeout=600) as client:
        outside_timings_ms(client, llama, {**base, "messages": asked})  # the client warmed
        plain = outside_timings_ms(client, llama, {**base, "messages": asked})
        first = outside_timings_ms(client, llama, {**with_tools, "messages": asked, "tool_choice": "auto"})
        second = outside_timings_ms(client, llama, {**with_tools, "messages": followup, "tool_choice": "none"})
    return first + second - plain


def timed_turn(http, conversation, on_running=None) -> tuple[float, list[dict]]:
    from tests.support.client import chat_socket, send

    with chat_socket(http) as ws:
        began = time.monotonic()
        send(ws, type="send", conversation=str(conversation.id), text=QUESTION)
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
        from chat.tools import providers
        from tests.support import queue_state
        from tests.support.client import login, make_user
        from tests.support.hold import read_queue
        from tests.support.profiles import live_id_here
        from tests.support.tool_provider import NAP_S, install
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
            install()  # the test tools, as the web process offers them, for the reference's requests
            app, added, outside, holds, cached = [], [], [], [], []
            for _run in range(RUNS):
                plain_ms, plain_events = timed_turn(http, conversation(False))
                plain_app = plain_ms - answer_stats(plain_events)["model_ms"]
                tooled = conversation(True)
                tool_ms, tool_events = timed_turn(http, tooled, held_ms)
                stats = answer_stats(tool_events)
                step = Message.objects.filter(role="assistant").latest("id").tool_steps[0]
                assert step["state"] == "done" and step["ms"] >= NAP_S * 1000, step
                tools = [spec.openai_tool() for spec in providers.tools_for(user, tooled)]
                outside.append(reference_ms(llama, live_id_here(profile), tools, step) / stats["tool_steps"])
                added.append((tool_ms - step["ms"] - stats["model_ms"] - plain_app) / stats["tool_steps"])
                app.append(added[-1] - outside[-1])
                followup = stats["followup"]
                total = followup["prompt_tokens"] + followup["cached_tokens"]
                cached.append(100 * followup["cached_tokens"] / total if total else 0)
                # The first step's prompt (every step's prompt tokens less the follow-up's).
                first = stats["prompt_tokens"] + stats["cached_tokens"] - total
                print(
                    f"run {_run + 1}: app {app[-1]:.1f} ms (turn added {added[-1]:.1f}, llama-server outside its "
                    f"timings {outside[-1]:.1f}), held {holds[-1]:.1f} ms, cached {cached[-1]:.1f}% "
                    f"({followup['cached_tokens']} of {total}; the first step's prompt {first})"
                )
        print(f"tool_step_app_ms={statistics.median(app):.1f}")
        print(f"tool_step_turn_added_ms={statistics.median(added):.1f}")
        print(f"tool_step_llama_outside_ms={statistics.median(outside):.1f}")
        print(f"tool_slot_held_ms={statistics.median(holds):.1f}")
        print(f"tool_followup_cached_pct={statistics.median(cached):.1f}")
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    main()
