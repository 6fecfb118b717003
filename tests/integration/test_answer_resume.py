"""What llama-server (the pinned build) makes of an answer that goes on (chat/conversations/resume.py):
the request of a resume sent to the real server, with the text it writes forced by a ``grammar``, so
what it streams is known: only the new text (never the answer so far again), inside the thinking when
the cut was there (the seeds' family: the synthetic ``qwen35moe`` with Qwen3.5's own template), and a
refusal when the history and the answer so far no longer leave room in the context."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import pytest

from chat.conversations.resume import ResumeRefused, continuation, fitted
from monitor.serving.slot import serving_pool
from tests.support.qwen35 import rendered_prompt, serving_profile

pytestmark = pytest.mark.usefixtures("redis_server")
MODELS = Path(os.environ["QWENWEB_MODELS_DIR"])
QUESTION = [{"role": "user", "content": "Why is the sky blue? (resume test)"}]


def resumed(profile: str | None, payload: dict, content: str, reasoning: str, n_ctx: int | None = None) -> dict:
    """What the serving slot streams for the resume of ``content``/``reasoning`` (its text and thought)."""

    async def go() -> dict:
        pool = await serving_pool(profile)
        async with pool.slot("test-resume") as slot:
            if n_ctx is not None:
                slot = dataclasses.replace(slot, info=dataclasses.replace(slot.info, n_ctx=n_ctx))
            written = await slot.client.count_tokens(reasoning + content)
            request = await fitted(slot, continuation(payload, content, reasoning, seed=11), written)
            seen = {"content": "", "reasoning_content": "", "max_tokens": request["max_tokens"]}
            async for batch in slot.stream_chat(request):
                for chunk in batch:
                    for choice in chunk.get("choices") or ():
                        for key in ("content", "reasoning_content"):
                            seen[key] += (choice.get("delta") or {}).get(key) or ""
            return seen

    return asyncio.run(go())


def test_an_answer_goes_on_from_its_text_and_the_stream_carries_only_the_new_text(llama):
    payload = {"messages": QUESTION, "max_tokens": 40, "grammar": 'root ::= " the sea."'}
    seen = resumed(None, payload, "Because of", "")
    assert seen["content"] == " the sea."  # llama-server's own output: the answer so far is not sent again
    assert seen["max_tokens"] < 40  # what was written counts against the answer's length


def test_cut_inside_the_thinking_it_goes_on_inside_the_thinking_on_qwen35(llama):
    forced = 'root ::= " scatters light.\\n</think>\\n\\nBlue light scatters most."'
    with serving_profile(MODELS, "qwen35-resume", extra_args="") as profile:
        payload = {"messages": QUESTION, "max_tokens": 60, "grammar": forced, "reasoning_format": "deepseek"}
        seen = resumed(profile.name, payload, "", "The air")
        prompt = rendered_prompt(llama, profile, "resume test")
    # The thought so far is the prompt's end, open: the model writes on inside it and closes it itself.
    assert "<|im_start|>assistant\n<think>\nThe air" in prompt and "The air\n</think>" not in prompt
    assert seen["reasoning_content"] == " scatters light.\n"
    assert seen["content"] == "Blue light scatters most."


def test_an_answer_whose_history_fills_the_context_is_refused(llama):
    payload = {"messages": QUESTION, "max_tokens": 40, "grammar": 'root ::= "x"'}
    with pytest.raises(ResumeRefused, match="fill the model's context"):
        resumed(None, payload, "Because of", "", n_ctx=20)
