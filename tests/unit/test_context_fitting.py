"""Fitting a conversation into the context: a conversation whose byte bound fits goes without a round
trip to llama-server; one that may not is rendered and counted there. The client here is a recorder
of the calls fitting makes (the real server's counts are checked in tests/integration)."""

import asyncio

from chat.conversations.context import answer_reserve, fit_messages

N_CTX = 4096
TEMPLATE = "<start_of_turn>{role}\n{content}<end_of_turn>\n"


class CountingClient:
    """Renders like a simple chat template and counts one token per byte (a token is never shorter)."""

    base_url = "http://127.0.0.1:1"

    def __init__(self):
        self.rendered = 0
        self.counted = 0

    async def apply_template(self, messages):
        self.rendered += 1
        return "<bos>" + "".join(TEMPLATE.format(**message) for message in messages)

    async def count_tokens(self, text):
        self.counted += 1
        return len(text.encode())


def conversation(turns: int, chars: int) -> list[dict]:
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": "x" * chars} for i in range(turns * 2 - 1)]


def test_a_conversation_within_the_bound_is_fitted_without_a_round_trip():
    client = CountingClient()
    budget = N_CTX - answer_reserve(N_CTX)
    # About two thirds of the budget in bytes: over the half that used to force a rendering.
    messages = conversation(5, budget * 2 // 3 // 9)

    async def fit_twice():
        await fit_messages(client, messages, N_CTX, "fitting-test")  # measures the template once
        before = client.rendered
        fitted = await fit_messages(client, messages, N_CTX, "fitting-test")
        return fitted, client.rendered - before

    fitted, renderings = asyncio.run(fit_twice())
    assert renderings == 0 and client.counted == 0
    assert fitted.dropped == 0 and fitted.messages == messages


def test_a_conversation_over_the_bound_is_counted_and_its_oldest_turns_dropped():
    client = CountingClient()
    budget = N_CTX - answer_reserve(N_CTX)
    messages = conversation(6, budget // 5)
    fitted = asyncio.run(fit_messages(client, messages, N_CTX, "fitting-test-long"))
    assert client.rendered > 2  # the template's measure, then the prompt itself
    assert fitted.dropped >= 2 and fitted.messages[0]["role"] == "user"
    rendered = asyncio.run(client.apply_template(fitted.messages))
    assert len(rendered.encode()) <= budget
