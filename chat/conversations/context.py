"""Fit a conversation into the model's context, counting with llama-server itself.

A token is never shorter than one byte of the rendered prompt, so a prompt whose
byte length is under the budget surely fits and needs no count. The template's
own bytes (a fixed part and a part per message) are measured once per template
with llama-server's ``/apply-template``; a short conversation is then bounded
without a request. Otherwise the prompt is rendered by llama-server and counted
with ``/tokenize``, and the oldest turns are dropped until it fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.utils.translation import ngettext

from chat.errors import ChatError
from monitor.public import PromptCounter

# What one image costs at most in prompt tokens (Gemma 3: 256; Qwen-VL at 512 px: ~330).
IMAGE_TOKENS = 768
MIN_ANSWER_TOKENS = 16


@dataclass
class FittedPrompt:
    messages: list[dict]
    dropped: int  # earlier messages left out
    max_tokens: int  # room left for the answer


def _image_count(messages: list[dict]) -> int:
    return sum(
        1
        for message in messages
        if isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image_url"
    )


_template_bytes: dict[tuple[str, str], tuple[int, int]] = {}


async def _template_overhead(client: PromptCounter, template_key: str) -> tuple[int, int]:
    """(fixed bytes, bytes per message) that the chat template adds around the content."""
    key = (client.base_url, template_key)
    if key not in _template_bytes:
        one = await client.apply_template([{"role": "user", "content": "x"}])
        three = await client.apply_template(
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}, {"role": "user", "content": "z"}]
        )
        per_message = max(0, len(three.encode()) - len(one.encode())) // 2 + 1
        _template_bytes[key] = (len(one.encode()), per_message)
    return _template_bytes[key]


def _content_bytes(messages: list[dict]) -> int:
    total = 0
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            total += len(content.encode())
        else:
            total += sum(len(part.get("text", "").encode()) for part in content)
    return total


async def _prompt_tokens(
    client: PromptCounter, messages: list[dict], budget: int, template_key: str
) -> tuple[int, bool]:
    """(tokens or an upper bound, exact?)"""
    fixed, per_message = await _template_overhead(client, template_key)
    images = _image_count(messages) * IMAGE_TOKENS
    # Twice the measured template bytes: room for roles, system prompts, tool blocks. A bound, so
    # a conversation whose bound fits is sent without a round trip (it used to need half the budget:
    # from a few turns on, every follow-up paid for rendering its whole prompt on llama-server).
    quick_bound = 2 * (fixed + per_message * len(messages)) + _content_bytes(messages) + images
    if quick_bound <= budget:
        return quick_bound, False
    rendered = await client.apply_template(messages)
    upper = len(rendered.encode()) + images
    if upper <= budget:
        return upper, False
    return await client.count_tokens(rendered) + images, True


def with_system_prompt(messages: list[dict], system_prompt: str) -> list[dict]:
    """The conversation's own system prompt goes first; a system message already there (the
    documents') follows it in the same message, since fitting keeps only the first one."""
    if not system_prompt:
        return messages
    if messages and messages[0]["role"] == "system":
        return [{"role": "system", "content": system_prompt + "\n\n" + messages[0]["content"]}, *messages[1:]]
    return [{"role": "system", "content": system_prompt}, *messages]


def answer_reserve(n_ctx: int) -> int:
    return max(MIN_ANSWER_TOKENS, min(settings.CHAT_MAX_ANSWER_TOKENS, n_ctx // 4))


def documents_budget(n_ctx: int) -> int:
    """Tokens the documents' system message may take: half of what the prompt may use,
    the other half stays for the conversation itself."""
    return (n_ctx - answer_reserve(n_ctx)) // 2


async def fit_messages(client: PromptCounter, messages: list[dict], n_ctx: int, template_key: str = "") -> FittedPrompt:
    """``messages``: an optional system message, then turns, the last one the user's."""
    reserve = answer_reserve(n_ctx)
    budget = n_ctx - reserve
    system = messages[:1] if messages and messages[0]["role"] == "system" else []
    turns = messages[len(system) :]
    while True:
        candidate = system + turns
        tokens, exact = await _prompt_tokens(client, candidate, budget, template_key)
        if tokens <= budget:
            max_tokens = min(settings.CHAT_MAX_ANSWER_TOKENS, n_ctx - tokens) if exact else reserve
            return FittedPrompt(candidate, len(messages) - len(candidate), max(max_tokens, MIN_ANSWER_TOKENS))
        if len(turns) <= 1:
            raise ChatError(
                ngettext(
                    "Your message is too long for this model: about %(tokens)d token, the limit is %(limit)d.",
                    "Your message is too long for this model: about %(tokens)d tokens, the limit is %(limit)d.",
                    tokens,
                )
                % {"tokens": tokens, "limit": budget}
            )
        # Drop the oldest turn, and keep the first remaining turn a user's (templates want it).
        turns = turns[1:]
        while len(turns) > 1 and turns[0]["role"] != "user":
            turns = turns[1:]
