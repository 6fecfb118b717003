"""Fit a conversation into the model's context, counting with llama-server itself.

The prompt is rendered by llama-server's own chat template (``/apply-template``).
A token is never shorter than one byte of the rendered prompt, so a prompt whose
byte length is under the budget surely fits and needs no count; otherwise
``/tokenize`` counts it, and the oldest turns are dropped until it fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.utils.translation import gettext as _

from chat.errors import ChatError
from monitor.llama_client import LlamaClient

# What one image costs at most in prompt tokens (Gemma 3: 256; Qwen-VL at 512 px: ~330).
IMAGE_TOKENS = 768
MIN_ANSWER_TOKENS = 16


@dataclass
class FittedPrompt:
    messages: list[dict]
    dropped: int  # earlier messages left out
    max_tokens: int  # room left for the answer
    prompt_tokens: int | None  # exact when it had to be counted


def _image_count(messages: list[dict]) -> int:
    return sum(
        1
        for message in messages
        if isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image_url"
    )


async def _prompt_tokens(client: LlamaClient, messages: list[dict], budget: int) -> tuple[int, bool]:
    """(tokens or an upper bound, exact?)"""
    rendered = await client.apply_template(messages)
    images = _image_count(messages) * IMAGE_TOKENS
    upper = len(rendered.encode()) + images
    if upper <= budget:
        return upper, False
    return await client.count_tokens(rendered) + images, True


def answer_reserve(n_ctx: int) -> int:
    return max(MIN_ANSWER_TOKENS, min(settings.CHAT_MAX_ANSWER_TOKENS, n_ctx // 4))


async def fit_messages(client: LlamaClient, messages: list[dict], n_ctx: int) -> FittedPrompt:
    """``messages``: an optional system message, then turns, the last one the user's."""
    reserve = answer_reserve(n_ctx)
    budget = n_ctx - reserve
    system = messages[:1] if messages and messages[0]["role"] == "system" else []
    turns = messages[len(system) :]
    dropped = 0
    while True:
        candidate = system + turns
        tokens, exact = await _prompt_tokens(client, candidate, budget)
        if tokens <= budget:
            max_tokens = min(settings.CHAT_MAX_ANSWER_TOKENS, n_ctx - tokens) if exact else reserve
            return FittedPrompt(candidate, dropped, max(max_tokens, MIN_ANSWER_TOKENS), tokens if exact else None)
        if len(turns) <= 1:
            raise ChatError(
                _("Your message is too long for this model: about %(tokens)d tokens, the limit is %(limit)d.")
                % {"tokens": tokens, "limit": budget}
            )
        # Drop the oldest turn, and keep the first remaining turn a user's (templates want it).
        turns = turns[1:]
        dropped += 1
        while len(turns) > 1 and turns[0]["role"] != "user":
            turns = turns[1:]
            dropped += 1
