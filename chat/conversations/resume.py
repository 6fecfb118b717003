"""An answer that outlives its server: when the llama-server writing an answer dies, is restarted or
freezes mid-answer, the answer goes on from the text already streamed, on another node serving the
same model file, or on the same box once its instance is back.

The conversation is sent again with the answer so far as the assistant's last message, with
``continue_final_message`` (and no generation prompt): llama-server (the pinned 11434) renders the
prompt up to that text and writes on from it, and its stream carries only the new text. Left to
``--prefill-assistant`` alone (on by default) it would continue just as well, but its stream starts
with the prefill again: the person would read the same words twice. The same sampling settings go
with it, and a seed of its own (the first one's tokens are behind it).

Cut inside the thinking (no answer text yet), the answer continues inside the thinking: the prompt
ends with ``<think>`` and the thought so far, with no end tag, and the model writes on from there,
closing the thought itself (tests/integration/test_answer_resume.py, on the seeds' ``qwen35moe``
family with Qwen3.5's own template). Cut after the thinking, the thought goes in whole and the answer
text goes on.

Only nodes whose registered model file has the same SHA256 take it (the node that wrote it always
may, once back): another file would go on in another voice. None within ``QWENWEB_RESUME_WAIT_S``, or
the history and the answer so far no longer leaving room to write in the context: the person is told
as before, with the partial answer kept. A Stop during the pause cancels the turn's task: nothing
resumes. The stored answer stays one message; each resume is noted in its figures (``resumed``: the
node and the character it went on from)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils.translation import gettext as _

from monitor.public import (
    LlamaHung,
    LlamaStreamBroken,
    LlamaUnavailable,
    ServingPool,
    ServingSlot,
    await_while_alive,
    model_digests,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
MIN_ROOM_TOKENS = 8  # less room than this left to write: not worth a resume, the person is told


class ResumeRefused(Exception):
    """The answer cannot go on; the message says why, fit to show."""


@dataclass
class Cut:
    """Where an answer was cut: the node that was writing it and what that cost it."""

    node: str
    error: Exception


@dataclass
class AnswerSoFar:
    """What the turn needs of its runner to go on: the text so far, and how to show and stream."""

    content: Callable[[], str]
    reasoning: Callable[[], str]
    emit: Callable[[dict], Awaitable[None]]
    stream: Callable[[ServingSlot, dict], Awaitable[dict]]
    resumes: list[dict] = field(default_factory=list)


def continuation(payload: dict, content: str, reasoning: str, seed: int) -> dict:
    """The request that goes on from ``content`` (and the thought ``reasoning``), with its own seed."""
    request = {**payload, "seed": seed}
    if not content and not reasoning:
        return request  # cut before any text: the same question again
    prefill: dict = {"role": "assistant", "content": content}
    if reasoning:
        prefill["reasoning_content"] = reasoning
    request["messages"] = [*payload["messages"], prefill]
    request["continue_final_message"] = True
    request["add_generation_prompt"] = False
    return request


def eligible_nodes(digests: dict[str, str], writer: str) -> Callable[[str], bool]:
    """Which nodes may take an answer ``writer`` was writing: itself, and those with its model file's
    SHA256 (none where the writer's file is not known)."""
    wanted = digests.get(writer, "")
    return lambda node: node == writer or (bool(wanted) and digests.get(node) == wanted)


async def fitted(slot: ServingSlot, request: dict, written_tokens: int) -> dict:
    """``request`` with the room left for the answer on that slot's instance; ResumeRefused when the
    history and the answer so far leave less than MIN_ROOM_TOKENS."""
    if not request.get("continue_final_message"):
        return request
    keys = ("continue_final_message", "add_generation_prompt", "chat_template_kwargs", "reasoning_effort")
    fields = {key: request[key] for key in keys if key in request}
    prompt = await _watched(slot, slot.client.apply_template(request["messages"], **fields))
    room = slot.info.n_ctx - await _watched(slot, slot.client.count_tokens(prompt))
    left = int(request.get("max_tokens") or room) - written_tokens
    if min(room, left) < MIN_ROOM_TOKENS:
        raise ResumeRefused(
            _("The answer could not go on: the conversation and its answer so far fill the model's context.")
        )
    return {**request, "max_tokens": min(room, left)}


async def carry_on(
    answer: AnswerSoFar, pool: ServingPool, payload: dict, cut: Cut, *, owner: str, affinity: str
) -> dict:
    """Go on with the answer after ``cut`` until it ends, on whichever eligible node the fair queue
    gives (again after each further cut), within QWENWEB_RESUME_WAIT_S of waiting for one per pause.
    Returns the last stream's figures; raises the cut's error when no node took it in time, and
    ResumeRefused when it cannot go on."""
    digests = await database_sync_to_async(model_digests)(pool.profile)
    told = False  # the person is told once per pause (a node given that fails before it writes is no news)
    while True:
        if settings.RESUME_WAIT_S <= 0:
            raise cut.error
        if not told:
            await answer.emit({"type": "notice", "text": _pause_notice()})
            told, until = True, time.monotonic() + settings.RESUME_WAIT_S
        resumed_before = len(answer.resumes)
        try:
            return await _one_resume(
                answer,
                pool,
                payload,
                eligible_nodes(digests, cut.node),
                wait_s=max(until - time.monotonic(), 0.0),
                owner=owner,
                affinity=affinity,
            )
        except TimeoutError:
            log.warning("answer cut on %s: no node took it within %s s", cut.node, settings.RESUME_WAIT_S)
            raise cut.error from None
        except _CutAgain as again:
            cut = Cut(again.node or cut.node, again.error)
            told = len(answer.resumes) == resumed_before


def _pause_notice() -> str:
    return _(
        "The model server stopped in the middle of the answer: it goes on as soon as a server can take it (at most %(s)d s)."
    ) % {"s": round(settings.RESUME_WAIT_S)}


class _CutAgain(Exception):
    """The node that took the answer failed too (its slot reported it to the pool)."""

    def __init__(self, node: str, error: Exception) -> None:
        super().__init__(str(error))
        self.node, self.error = node, error


async def _one_resume(
    answer: AnswerSoFar,
    pool: ServingPool,
    payload: dict,
    eligible: Callable[[str], bool],
    *,
    wait_s: float,
    owner: str,
    affinity: str,
) -> dict:
    """One try: a slot on an eligible node within the bound, then the rest of the answer from there.
    No preference for the conversation's node (the one that failed, most likely); the node that ends
    it is remembered for the conversation's next turn."""
    cut_at = time.monotonic()
    node = ""
    try:
        async with asyncio.timeout(wait_s) as bound:
            async with pool.slot(owner, priority="person", remember_as=affinity, eligible=eligible) as slot:
                bound.reschedule(None)  # the bound is on the wait for a node, never on the writing
                node = slot.node
                content, reasoning = answer.content(), answer.reasoning()
                written = (
                    await _watched(slot, slot.client.count_tokens(reasoning + content)) if content or reasoning else 0
                )
                request = await fitted(slot, continuation(payload, content, reasoning, _seed()), written)
                answer.resumes.append(
                    {
                        "node": node,
                        "at": len(content),
                        "in_thinking": not content and bool(reasoning),
                        "written": written,
                    }
                )
                await answer.emit({"type": "resumed", "node": node})
                log.info("answer resumed on %s after %.1f s", node, time.monotonic() - cut_at)
                stats = await answer.stream(slot, request)
                await slot.remember(stats)
                note_cut_streams(answer.resumes, stats)
                return stats
    except (LlamaStreamBroken, LlamaUnavailable) as error:  # reported to the pool by the slot
        raise _CutAgain(node, error) from error


def note_cut_streams(resumes: list[dict], stats: dict) -> None:
    """The tokens of the streams cut before this one, noted on their resumes (the quota and the usage
    ledger count them: chat.usage.entries.cut_streams). A cut stream reported no figures; its prompt was
    the question's, which is this stream's prompt less what was written before it (the continuation
    carries the answer so far), plus what was written before that stream began; its output, what it
    wrote. Notes from an earlier step of the same answer (a tool loop's) have their figures already."""
    prompt = stats.get("prompt_tokens")
    if not isinstance(prompt, int):
        return
    question = max(prompt + int(stats.get("cached_tokens") or 0) - resumes[-1]["written"], 0)
    before = 0
    for note in resumes:
        if "cut_prompt" not in note:
            note["cut_prompt"], note["cut_output"] = question + before, max(note["written"] - before, 0)
        before = note["written"]


async def _watched(slot: ServingSlot, work: Awaitable[T]) -> T:
    """A request to the slot's instance before the answer streams, given up (LlamaHung, which the slot
    reports) when the instance does not answer a check: a node given again before its frozen instance
    was restarted must not hold the answer for the client's whole read timeout."""
    return await await_while_alive(work, slot.still_working, settings.POOL_OUT_CHECK_S or 1.0, LlamaHung)


def _seed() -> int:
    return random.randrange(2**32)  # noqa: S311 (sampling, not secrecy)
