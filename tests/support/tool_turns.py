"""A chat turn with tools over the real socket, as the tool loop's tests read it
(tests/integration/test_tool_loop.py with the test tools, test_mcp_in_chat.py with a real MCP server):
the events the page gets, each step as it last showed, and whether the model's slot is free."""

from __future__ import annotations

import json

from chat.models import Message
from tests.support import queue_state
from tests.support.client import chat_socket, events_until, send
from tests.support.hold import queue_slots_held, read_queue
from tests.support.profiles import live_id_here


def turn(
    http, conversation, on_step=None, text: str = "Use the tool.", while_queued=None
) -> tuple[list[dict], Message]:
    """One answer over the real socket; ``on_step(ws, step)`` sees each tool event as it comes;
    ``while_queued()`` runs once the turn was offered its tools and waits in the fair queue (the test holds it)."""
    with chat_socket(http) as ws:
        if while_queued is None:
            send(ws, type="send", conversation=str(conversation.id), text=text)
            events = []
        else:
            with queue_slots_held(conversation.profile.name, 2):
                send(ws, type="send", conversation=str(conversation.id), text=text)
                events = events_until(ws, "queued")
                while_queued()
        while True:
            try:
                event = json.loads(ws.recv(timeout=60))
            except TimeoutError as error:
                raise AssertionError(f"no event after {events}") from error
            events.append(event)
            if event["type"] == "tool" and on_step is not None:
                on_step(ws, event["step"])
            if event["type"] in ("done", "error"):
                break
    accepted = next(event for event in events if event["type"] == "accepted")
    return events, Message.objects.get(id=accepted["assistant_message"]["id"])


def shown_steps(events: list[dict]) -> list[dict]:
    """Each step as its last event showed it, in order."""
    latest: dict[str, dict] = {}
    for event in events:
        if event["type"] == "tool":
            latest[event["step"]["id"]] = event["step"]
    return list(latest.values())


def slot_free(llama_server, profile) -> bool:
    """llama-server's slots all idle, and no grant of the profile's fair queue held."""
    slots = llama_server.slots(live_id_here(profile))
    held = read_queue(profile.name, lambda queue: queue_state.active_count(queue))
    return not any(slot["is_processing"] for slot in slots) and held == 0


def prompt_tokens_of_one_step_turn(events: list[dict]) -> tuple[int, int, int]:
    """A turn of one tool step, from its ``done`` stats: the first request's prompt, how much of the
    follow-up's prompt llama-server took from its cache, and the follow-up's whole prompt (in tokens)."""
    stats, followup = events[-1]["stats"], events[-1]["stats"]["followup"]
    followup_prompt = followup["prompt_tokens"] + followup["cached_tokens"]
    return stats["prompt_tokens"] + stats["cached_tokens"] - followup_prompt, followup["cached_tokens"], followup_prompt
