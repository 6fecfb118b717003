"""What each path that uses a model records: the entry of a chat answer, an API request and a document
job's model call, made from what that path already holds (its serving slot, llama-server's figures).

The API's entry is made in the relay's ``finally``: the exception leaving that block, if any, is its
outcome (a client gone away: stopped; anything else: error).
"""

from __future__ import annotations

import asyncio
import sys

from chat.usage.models import UsageKind, UsageOutcome
from chat.usage.services import UsageEntry, served_times
from monitor.public import ServingSlot

API_KINDS = {
    "chat/completions": UsageKind.API_CHAT,
    "completions": UsageKind.API_COMPLETION,
    "embeddings": UsageKind.API_EMBEDDING,
    "rerank": UsageKind.API_RERANK,
}
# A chat answer's status (``Message.Status``) as an outcome.
ANSWER_OUTCOMES = {
    "complete": UsageOutcome.OK,
    "stopped": UsageOutcome.STOPPED,
    "incomplete": UsageOutcome.INCOMPLETE,
    "error": UsageOutcome.ERROR,
}


def _served(entry: UsageEntry, slot: ServingSlot | None) -> UsageEntry:
    if slot is not None:
        entry.profile, entry.node = slot.profile.name, slot.node
        entry.queue_ms, entry.duration_ms = served_times(slot.asked_at, slot.granted_at)
    return entry


def _outcome_leaving() -> str:
    """The outcome of the block whose ``finally`` is running: the exception leaving it, if any."""
    error = sys.exc_info()[1]
    if error is None:
        return UsageOutcome.OK
    if isinstance(error, (asyncio.CancelledError, GeneratorExit)):
        return UsageOutcome.STOPPED
    return UsageOutcome.ERROR


def api_entry(
    key, endpoint: str, slot: ServingSlot, usage: tuple[int, int], figures: dict, finished: bool = True
) -> UsageEntry:
    """An API request's entry (``key``: the caller's key, ``usage``: its (prompt, output) tokens as the
    answer reported them, ``figures``: its llama.cpp timings, ``finished``: the stream reached its end)."""
    outcome = _outcome_leaving()
    if outcome == UsageOutcome.OK and not finished:
        outcome = UsageOutcome.ERROR
    entry = UsageEntry(
        user_id=key.owner_id,
        api_key_id=key.id,
        kind=API_KINDS.get(endpoint, UsageKind.API_CHAT),
        prompt_tokens=usage[0],
        cached_tokens=int(figures.get("cached_tokens") or 0),
        output_tokens=usage[1],
        outcome=outcome,
    )
    return _served(entry, slot)


def cut_streams(stats: dict | None) -> tuple[int, int]:
    """(prompt, output) tokens of the streams a model server's failure cut in an answer that went on
    elsewhere (chat.conversations.resume notes them in ``stats["resumed"]``): they reported no figures
    of their own, and were spent all the same."""
    notes = (stats or {}).get("resumed")
    if not isinstance(notes, list):
        return 0, 0
    prompt = sum(_count(note.get("cut_prompt")) for note in notes if isinstance(note, dict))
    return prompt, sum(_count(note.get("cut_output")) for note in notes if isinstance(note, dict))


def answer_entry(owner_id: int, status: str, stats: dict | None, estimate: int, slot: ServingSlot | None) -> UsageEntry:
    """A chat answer's entry. llama-server's timings count the prompt it computed (``prompt_tokens``) apart
    from what came from its cache; the ledger's prompt is both. An answer ended before its figures came
    counts ``estimate`` output tokens (its length, as the quota counts it)."""
    stats = stats or {}
    computed, cached, output = (_count(stats.get(name)) for name in ("prompt_tokens", "cached_tokens", "output_tokens"))
    has_figures = any(isinstance(stats.get(name), int) for name in ("prompt_tokens", "output_tokens"))
    cut_prompt, cut_output = cut_streams(stats)
    entry = UsageEntry(
        user_id=owner_id,
        kind=UsageKind.CHAT,
        prompt_tokens=computed + cached + cut_prompt,
        cached_tokens=cached,
        output_tokens=(output if has_figures else estimate) + cut_output,
        outcome=ANSWER_OUTCOMES.get(status, UsageOutcome.ERROR),
    )
    return _served(entry, slot)


def document_entry(owner_id: int, slot: ServingSlot, timings: dict) -> UsageEntry:
    """A document job's model call (a summary's part, a scanned page read), made in its ``finally``."""
    cached = _count(timings.get("cache_n"))
    entry = UsageEntry(
        user_id=owner_id,
        kind=UsageKind.DOCUMENT,
        prompt_tokens=_count(timings.get("prompt_n")) + cached,
        cached_tokens=cached,
        output_tokens=_count(timings.get("predicted_n")),
        outcome=_outcome_leaving(),
    )
    return _served(entry, slot)


def knowledge_entry(owner_id: int, slot: ServingSlot, prompt_tokens: int) -> UsageEntry:
    """A knowledge base's call to its embeddings or reranking profile (a document's passages, a
    question), made in its ``finally``."""
    entry = UsageEntry(
        user_id=owner_id, kind=UsageKind.KNOWLEDGE, prompt_tokens=max(0, prompt_tokens), outcome=_outcome_leaving()
    )
    return _served(entry, slot)


def _count(value) -> int:
    return value if isinstance(value, int) and value > 0 else 0
