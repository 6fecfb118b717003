"""The one transport to llama-server against the real one: over TLS (a relay with a certificate made
here, tests/support/tls.py), and the stall hook while the router is held with SIGSTOP.

Answers are forced with llama-server's ``grammar`` field, and a held router is released by the
test itself, so nothing here races the model's speed.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest
from django.conf import settings
from django.test import override_settings

from monitor.llama.client import LlamaClient
from monitor.llama.errors import LlamaHung, LlamaUnavailable
from tests.support.tls import make_certificates, tls_relay

FORCED = "Hello over TLS"
QUESTION = {
    "messages": [{"role": "user", "content": "Say hello."}],
    "max_tokens": 32,
    "grammar": f'root ::= "{FORCED}"',
}


def text_of(batches: list[list[dict]]) -> str:
    return "".join(
        choice.get("delta", {}).get("content") or ""
        for batch in batches
        for chunk in batch
        for choice in chunk["choices"]
    )


async def chat(client: LlamaClient, payload: dict, **options) -> list[list[dict]]:
    return [batch async for batch in client.stream_chat(payload, **options)]


@pytest.fixture
def model(llama) -> str:
    """The default profile's instance on the router (read here: the tests' event loops cannot ask Django)."""
    return llama.model_id


@pytest.fixture
def https_url(llama, tmp_path):
    certificates = make_certificates(tmp_path)
    with tls_relay(llama.url, certificates) as url:
        yield url, str(certificates.ca)


def test_a_streamed_answer_and_plain_requests_over_https_with_the_ca_file_setting(model, https_url):
    url, ca_file = https_url

    async def main():
        client = LlamaClient(base_url=url, model=model)
        models = await LlamaClient(base_url=url).list_models()
        tokens = await client.count_tokens("Hello over TLS")
        batches = await chat(client, QUESTION, pace_s=0.05)
        relayed = b"".join([data async for data in client.stream_raw("/v1/chat/completions", QUESTION, pace_s=0.05)])
        return models, tokens, batches, relayed

    with override_settings(LLAMA_CA_FILE=ca_file):  # the setting, as a remote profile's client reads it
        models, tokens, batches, relayed = asyncio.run(main())
    assert model in [listed["id"] for listed in models]
    assert tokens > 1
    assert text_of(batches) == FORCED
    # The relayed bytes as they came: events to their [DONE]; the forced text may come in any pieces.
    events = [line[len(b"data: ") :] for line in relayed.splitlines() if line.startswith(b"data: ")]
    assert events[-1] == b"[DONE]"
    assert text_of([[json.loads(event) for event in events[:-1]]]) == FORCED


def test_https_to_a_certificate_no_one_trusts_is_refused(model, https_url):
    url, _ca_file = https_url
    assert not settings.LLAMA_CA_FILE
    client = LlamaClient(base_url=url, model=model)
    for work in (client.list_models(), chat(client, QUESTION)):
        with pytest.raises(LlamaUnavailable) as refused:
            asyncio.run(work)
        assert "certificate is not trusted" in str(refused.value)


def router_held(llama, held: bool) -> None:
    os.kill(llama.router_pid(), signal.SIGSTOP if held else signal.SIGCONT)


def test_a_stall_asks_the_check_and_waits_on_while_it_says_the_server_is_working(llama, model):
    """Held before the request: no head comes; the check releases the router and says "working"."""
    checks = []

    async def still_working() -> bool:
        checks.append(1)
        router_held(llama, False)
        return True

    router_held(llama, True)
    try:
        batches = asyncio.run(chat(LlamaClient(model=model), QUESTION, stall_s=0.5, on_stall=still_working))
    finally:
        router_held(llama, False)
    assert checks and text_of(batches) == FORCED


def test_a_stall_the_check_calls_hung_ends_the_answer_with_what_came(llama, model):
    """Held once the answer's text has begun: the bytes already sent are read, then no more come."""
    long_answer = {"messages": QUESTION["messages"], "max_tokens": 2000, "ignore_eos": True}
    batches: list[list[dict]] = []
    held, checks = [], []

    async def working_unless_held() -> bool:
        if not held:
            return True  # a slow prompt before the hold is work, not a hang
        checks.append(1)
        if len(checks) > 1:  # asked again after it said "hung": let the stream end (the test fails below)
            router_held(llama, False)
        return False

    async def main():
        client = LlamaClient(model=model)
        async for batch in client.stream_chat(long_answer, stall_s=0.5, on_stall=working_unless_held):
            batches.append(batch)
            if text_of(batches) and not held:
                router_held(llama, True)
                held.append(1)

    try:
        with pytest.raises(LlamaHung) as hung:
            asyncio.run(main())
    finally:
        router_held(llama, False)
    assert held and checks == [1] and text_of(batches)
    assert "stopped responding" in str(hung.value)


def test_a_stall_before_any_answer_that_the_check_calls_hung_is_llama_hung(llama, model):
    checks = []

    async def hung() -> bool:
        checks.append(1)
        if len(checks) > 1:  # asked again after it said "hung": let the answer come (the test fails below)
            router_held(llama, False)
        return False

    router_held(llama, True)
    try:
        with pytest.raises(LlamaHung):
            asyncio.run(chat(LlamaClient(model=model), QUESTION, stall_s=0.3, on_stall=hung))
    finally:
        router_held(llama, False)
    assert checks == [1]
