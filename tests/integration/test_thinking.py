"""Thinking: reasoning streams apart from the answer, and the switch reaches llama-server.

The default Gemma model has no thinking template, so a second real llama-server
runs it with a template that opens a <think> block when thinking is on (the way
Qwen3-style templates do); llama-server's own reasoning parser then sends what the
model writes as `reasoning_content`.
"""

import asyncio
import os
from pathlib import Path

import pytest
from django.conf import settings

from chat.conversations.turns import TurnRunner
from chat.models import Conversation, Message
from monitor.llama.binary import llama_environment
from monitor.redis_clients import close_loop_clients
from monitor.serving.slot import serving_pool
from tests.support import stack
from tests.support.client import make_user
from tests.support.turns import upstream_profile

TEMPLATE = Path(__file__).resolve().parents[1] / "support" / "think-template.jinja"


@pytest.fixture(scope="module")
def thinking_server(run_dir, redis_server):
    port = stack.free_port()
    argv = [
        os.environ["LLAMA_SERVER_BIN"],
        "--model", str(settings.MODELS_DIR / settings.DEFAULT_MODEL_FILE),
        "--host", "127.0.0.1", "--port", str(port),
        "--ctx-size", "4096", "--parallel", "2",
        "--chat-template-file", str(TEMPLATE),
        "--no-webui",
    ]  # fmt: skip
    server = stack.PlainLlamaServer(run_dir, argv, llama_environment(), f"http://127.0.0.1:{port}")
    server.name = "llama-thinking"
    server.log_path = run_dir / "llama-thinking.log"
    server.start()
    yield server
    server.stop()


def make_runner(server, *, thinking: bool, budget=None, send=None) -> tuple[TurnRunner, Message]:
    user = make_user()
    conversation = Conversation.objects.create(
        owner=user,
        thinking_enabled=thinking,
        thinking_budget=budget,
        profile=upstream_profile(server.url, settings.LLAMA_API_KEY),
    )
    Message.objects.create(conversation=conversation, role="user", content="Why is the sky blue?")
    assistant = Message.objects.create(conversation=conversation, role="assistant", status="streaming")

    async def ignore(event):
        pass

    runner = TurnRunner(
        conversation=conversation,
        assistant_id=assistant.id,
        user_key=str(user.id),
        send=send or ignore,
        options={"seed": 11, "max_tokens": 40},
    )
    return runner, assistant


def run_turn(server, *, thinking: bool, budget=None):
    events = []

    async def collect(event):
        events.append(event)

    runner, assistant = make_runner(server, thinking=thinking, budget=budget, send=collect)

    async def main():
        await runner.start()
        await close_loop_clients()

    asyncio.run(main())
    assistant.refresh_from_db()
    return events, assistant


def test_reasoning_streams_apart_from_the_answer(thinking_server):
    events, message = run_turn(thinking_server, thinking=True)
    reasoning = "".join(e["text"] for e in events if e["type"] == "reasoning")
    assert reasoning, events
    assert message.reasoning == reasoning
    assert message.content == "".join(e["text"] for e in events if e["type"] == "token")
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete"


def test_thinking_off_reaches_the_template(thinking_server):
    events, message = run_turn(thinking_server, thinking=False)
    assert not [e for e in events if e["type"] == "reasoning"]
    assert message.content and not message.reasoning


def test_thinking_budget_reaches_llama_server(thinking_server):
    """The conversation's budget goes into the request llama-server gets, rendered by its own template.

    What the model then writes is not asserted: the pinned llama-server applies a reasoning
    budget only where its template analysis finds the end-of-thinking tags, and a 270M model
    may write anything, or nothing, after them.
    """
    runner, _ = make_runner(thinking_server, thinking=True, budget=0)

    async def prepare():
        try:
            inputs = await runner._inputs()
            return await runner._prepare(inputs, await serving_pool(inputs.profile))
        finally:
            await close_loop_clients()

    payload, _notice = asyncio.run(prepare())
    assert payload["thinking_budget_tokens"] == 0
    assert payload["chat_template_kwargs"] == {"enable_thinking": True}
    assert "reasoning_effort" not in payload
    runner, _ = make_runner(thinking_server, thinking=True, budget=None)
    payload, _notice = asyncio.run(prepare())
    assert "thinking_budget_tokens" not in payload
