"""The OpenAI-compatible API through the running app (Daphne, Redis, real llama-server
with the default model), driven by the official ``openai`` client, and raw httpx for
the error shapes."""

import asyncio
import json
import re
import threading
import time

import httpx
import openai
import pytest

from chat.api.keys import create_key
from chat.api.limits import KeyLimiter
from chat.models import ApiKey, UsageRecord
from monitor.models import ServerProfile
from monitor.profiles.selectors import user_profiles
from monitor.serving.queue import FairQueue
from tests.support import queue_state
from tests.support.client import base_url, login, make_user

pytestmark = pytest.mark.usefixtures("web_server")

MODEL = "chat-8k"
CALL_ID = "call_0001"
SHORT = {"max_tokens": 12, "seed": 3, "temperature": 0}
# Two requests compared token for token: each computes its prompt afresh (a prompt taken from the cache is
# finished in another batch size, and llama-server's logits then may differ a little: a near-tie can flip).
SAME_TWICE = {"cache_prompt": False}
# An answer that never ends by itself (the grammar is never complete, so no end of turn is allowed): it runs
# to its max_tokens, so a test that acts on it mid-answer finds it still running, whatever the model writes.
ENDLESS = {"grammar": 'root ::= "tick " root'}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture
def owner_key(llama):
    user = make_user()
    row, key = create_key(user, "test agent")
    return user, row, key


def api(key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url() + "/v1", api_key=key, max_retries=0, timeout=120)


def raw_post(path: str, key: str | None, **kwargs) -> httpx.Response:
    headers = kwargs.pop("headers", {})
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(base_url() + path, headers=headers, timeout=120, **kwargs)


def assert_openai_error(response: httpx.Response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error["message"], str) and error["message"]
    assert "type" in error
    if code is not None:
        assert error["code"] == code, error
    return error


def slots_idle_within(llama, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(slot["is_processing"] for slot in llama.slots()):
            return True
        time.sleep(0.05)
    return False


def test_models_lists_the_profiles_users_may_use(owner_key):
    _, _, key = owner_key
    hidden = ServerProfile.objects.get(name="long-32k")
    hidden.available_to_users = False
    hidden.save()
    try:
        ids = [model.id for model in api(key).models.list()]
        assert ids == sorted(user_profiles().values_list("name", flat=True))
        assert MODEL in ids and "long-32k" not in ids
        assert api(key).models.retrieve(MODEL).id == MODEL
        with pytest.raises(openai.NotFoundError):
            api(key).models.retrieve("long-32k")
        # Naming a profile users may not use is the same as naming none.
        body = {"model": "long-32k", "messages": [{"role": "user", "content": "Hi"}]}
        response = raw_post("/v1/chat/completions", key, json=body)
        assert_openai_error(response, 404, "model_not_found")
    finally:
        hidden.available_to_users = True
        hidden.save()


def test_plain_completion_and_usage_counted(owner_key, llama):
    _, row, key = owner_key
    messages = [{"role": "user", "content": "Say hello."}]
    answer = api(key).chat.completions.create(model=MODEL, messages=messages, extra_body=SAME_TWICE, **SHORT)
    assert answer.object == "chat.completion"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].message.content
    assert answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
    # The same request straight to llama-server gives the same answer: passed through intact.
    direct = httpx.post(
        llama.url + "/v1/chat/completions",
        json={"model": llama.model_id, "messages": messages, **SAME_TWICE, **SHORT},
        headers={"Authorization": f"Bearer {llama.env['LLAMA_API_KEY']}"},
        timeout=60,
    ).json()
    assert answer.choices[0].message.content == direct["choices"][0]["message"]["content"]
    row.refresh_from_db()
    assert (row.requests, row.prompt_tokens, row.completion_tokens) == (
        1,
        answer.usage.prompt_tokens,
        answer.usage.completion_tokens,
    )
    assert row.last_used_at is not None


def test_streamed_completion_and_usage_counted(owner_key):
    _, row, key = owner_key
    messages = [{"role": "user", "content": "Write a line about rain."}]
    plain = api(key).chat.completions.create(model=MODEL, messages=messages, extra_body=SAME_TWICE, **SHORT)
    chunks = list(
        api(key).chat.completions.create(model=MODEL, messages=messages, stream=True, extra_body=SAME_TWICE, **SHORT)
    )
    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    pieces = [chunk.choices[0].delta.content for chunk in chunks if chunk.choices and chunk.choices[0].delta.content]
    assert len(pieces) >= min(2, plain.usage.completion_tokens)  # streamed in pieces, however long it is
    assert "".join(pieces) == plain.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason in ("length", "stop")
    row.refresh_from_db()
    assert row.requests == 2
    assert row.completion_tokens == 2 * plain.usage.completion_tokens
    assert row.prompt_tokens == 2 * plain.usage.prompt_tokens

    # Asked for, the usage chunk comes last with no choices, as OpenAI sends it.
    chunks = list(
        api(key).chat.completions.create(
            model=MODEL,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=SAME_TWICE,
            **SHORT,
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_legacy_completions_and_response_format(owner_key):
    _, row, key = owner_key
    text = api(key).completions.create(model=MODEL, prompt="The capital of France is", max_tokens=6, seed=1)
    assert text.object == "text_completion" and isinstance(text.choices[0].text, str)
    [ledger] = UsageRecord.objects.filter(api_key=row)
    assert (ledger.kind, ledger.profile, ledger.outcome) == ("api-completion", MODEL, "ok")
    assert (ledger.prompt_tokens, ledger.output_tokens) == (text.usage.prompt_tokens, text.usage.completion_tokens)
    answer = api(key).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Is the sky blue? Answer in JSON."}],
        response_format={
            "type": "json_schema",
            "json_schema": {
                "name": "answer",
                "schema": {
                    "type": "object",
                    "properties": {"yes": {"type": "boolean"}},
                    "required": ["yes"],
                    "additionalProperties": False,
                },
            },
        },
        # The schema's grammar bounds the answer (llama.cpp's json-schema-to-grammar lets at most 22
        # characters of whitespace between two of its tokens): it ends well within this, whatever
        # the model chooses to write.
        max_tokens=256,
        seed=1,
        temperature=0,
    )
    assert answer.choices[0].finish_reason == "stop", answer
    assert isinstance(json.loads(answer.choices[0].message.content)["yes"], bool)


def test_tool_request_and_round_trip_through_the_real_server(owner_key):
    _, _, key = owner_key
    client = api(key)
    answer = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER_TOOL],
        tool_choice="auto",
        **SHORT,
    )
    message = answer.choices[0].message
    assert message.role == "assistant" and (message.content or message.tool_calls)
    # The second leg: the assistant's tool call and the tool's result go back.
    answer = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": CALL_ID,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": CALL_ID, "content": '{"temperature_c": 21, "sky": "clear"}'},
        ],
        tools=[WEATHER_TOOL],
        **SHORT,
    )
    assert answer.choices[0].message.content and answer.usage.prompt_tokens > 20


def test_revoked_key_fails_on_the_next_request(llama):
    user = make_user()
    http = login(user)
    page = http.post("/keys/new/", data={"name": "laptop", "csrfmiddlewaretoken": http.cookies["csrftoken"]})
    assert page.status_code == 201
    key = re.search(r'id="new-key-value">(qw-[^<]+)<', page.text).group(1)
    row = ApiKey.objects.get(owner=user)
    assert row.key_hash != key and key not in row.key_hash and row.prefix in key
    # Shown once: the list shows only the key's id afterwards.
    listing = http.get("/keys/").text
    assert key not in listing and row.display_id in listing
    assert api(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)

    http.post(f"/keys/{row.id}/revoke/", data={"csrfmiddlewaretoken": http.cookies["csrftoken"]})
    with pytest.raises(openai.AuthenticationError) as refused:
        api(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert "revoked" in refused.value.message
    with pytest.raises(openai.AuthenticationError):
        api(key).models.list()

    # Someone else cannot revoke (or learn about) this user's keys.
    stranger = login(make_user())
    other = create_key(user, "second")[0]
    response = stranger.post(f"/keys/{other.id}/revoke/", data={"csrfmiddlewaretoken": stranger.cookies["csrftoken"]})
    assert response.status_code == 404
    other.refresh_from_db()
    assert other.is_active


@pytest.mark.parametrize(
    "authorization,message",
    [
        (None, "No API key given"),
        ("Bearer", "No API key given"),
        ("Basic dXNlcjpwYXNz", "No API key given"),
        ("Bearer qw-00000000_notakey", "Incorrect API key"),
        ("Bearer sk-something-else", "Incorrect API key"),
    ],
)
def test_missing_or_wrong_key_is_401_in_openai_shape(authorization, message):
    headers = {"Authorization": authorization} if authorization else {}
    response = httpx.post(
        base_url() + "/v1/chat/completions", headers=headers, json={"model": MODEL, "messages": []}, timeout=30
    )
    error = assert_openai_error(response, 401, "invalid_api_key")
    assert message in error["message"]
    assert httpx.get(base_url() + "/v1/models", headers=headers, timeout=30).status_code == 401


def test_a_right_prefix_with_a_wrong_secret_is_refused(owner_key):
    _, row, key = owner_key
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    response = httpx.get(base_url() + "/v1/models", headers={"Authorization": f"Bearer {forged}"}, timeout=30)
    assert_openai_error(response, 401, "invalid_api_key")


@pytest.mark.parametrize(
    "body,param,words",
    [
        ({"model": MODEL, "messages": [], "n": 2}, "n", "Unsupported parameter 'n'"),
        ({"model": MODEL, "prompt": "x", "best_of": 3}, "best_of", "Unsupported parameter 'best_of'"),
        ({"messages": []}, "model", "Name a model"),
        ({"model": MODEL, "messages": [], "stream": "yes"}, "stream", "'stream' must be true or false"),
        (
            {
                "model": MODEL,
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://10.0.0.1/x.png"}}]}
                ],
            },
            "image_url",
            "data: URL",
        ),
    ],
)
def test_unsupported_parameters_are_400_naming_them(owner_key, body, param, words):
    _, row, key = owner_key
    path = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
    error = assert_openai_error(raw_post(path, key, json=body), 400)
    assert error["param"] == param and words in error["message"]
    row.refresh_from_db()
    assert row.requests == 0  # refused before it reached the model


def test_malformed_bodies_are_400_and_oversized_ones_413(owner_key):
    _, _, key = owner_key
    headers = {"Content-Type": "application/json"}
    error = assert_openai_error(
        raw_post("/v1/chat/completions", key, content=b'{"model": "chat-8k", "messages": [', headers=headers), 400
    )
    assert "not valid JSON" in error["message"] and error["code"] == "invalid_json"
    error = assert_openai_error(raw_post("/v1/chat/completions", key, content=b"[1, 2]", headers=headers), 400)
    assert "must be a JSON object" in error["message"]
    huge = b'{"model": "chat-8k", "messages": [{"role": "user", "content": "' + b"a" * (21 * 1024 * 1024) + b'"}]}'
    # Refused while the body arrives (qwenweb/patches/daphne_body_cap.py), in OpenAI's shape.
    error = assert_openai_error(raw_post("/v1/chat/completions", key, content=huge, headers=headers), 413)
    assert error["code"] == "request_too_large" and "20 MB" in error["message"]


def test_unknown_model_endpoint_and_method(owner_key):
    _, _, key = owner_key
    with pytest.raises(openai.NotFoundError) as missing:
        api(key).chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "Hi"}])
    assert missing.value.code == "model_not_found" and "no-such-model" in missing.value.message
    assert_openai_error(httpx.get(base_url() + "/v1/nothing/here", timeout=30), 404, "unknown_url")
    response = httpx.get(base_url() + "/v1/chat/completions", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert_openai_error(response, 405, "method_not_allowed")


def test_upstream_errors_are_relayed_with_their_status(owner_key):
    _, _, key = owner_key
    # llama-server's own refusal (a prompt far over the context) comes back as it sent it.
    response = raw_post(
        "/v1/chat/completions",
        key,
        json={"model": MODEL, "messages": [{"role": "user", "content": "word " * 6000}], "max_tokens": 4},
    )
    assert response.status_code == 400, response.text
    assert "context" in response.json()["error"]["message"].lower()
    # Embeddings: this profile's server was not started with --embeddings; its answer is relayed.
    response = raw_post("/v1/embeddings", key, json={"model": MODEL, "input": "hello"})
    assert response.status_code >= 400 and response.json()["error"]["message"]


def open_stream(key: str, max_tokens: int = 1000):
    """A streamed request read with raw httpx: (client, response, lines) left open mid-answer."""
    client = httpx.Client(timeout=120)
    request = client.build_request(
        "POST",
        base_url() + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}"},
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": "Count from one to five hundred."}],
            "max_tokens": max_tokens,
            "seed": 2,
            "stream": True,
            **ENDLESS,
        },
    )
    response = client.send(request, stream=True)
    assert response.status_code == 200, response.read()
    lines = response.iter_lines()
    seen = 0
    while seen < 5:
        if next(lines).startswith("data: {"):
            seen += 1
    return client, response, lines


async def _key_in_flight(key_id: int) -> int:
    """The key's requests whose concurrency tickets are still live (the limiter's sorted set)."""
    limiter = KeyLimiter()
    return int(await limiter.redis.get().zcount(limiter._set(key_id), int(time.time() * 1000), "+inf"))


def test_client_disconnect_frees_the_slot_and_the_turn_at_once(owner_key, llama):
    _, row, key = owner_key
    client, response, _lines = open_stream(key)
    assert any(slot["is_processing"] for slot in llama.slots())
    assert asyncio.run(queue_state.active_count(FairQueue(MODEL))) == 1
    assert asyncio.run(_key_in_flight(row.id)) == 1
    response.close()
    client.close()
    # 1000 tokens take far longer than this even on a fast box; a loaded 2-core box needs seconds to notice.
    assert slots_idle_within(llama, 10), "llama-server kept generating after the client left"
    assert asyncio.run(queue_state.active_count(FairQueue(MODEL))) == 0
    assert asyncio.run(_key_in_flight(row.id)) == 0
    row.refresh_from_db()
    assert row.requests == 1 and row.completion_tokens >= 5


def test_concurrency_limit_per_key_is_429(owner_key, llama):
    _, row, key = owner_key
    row.concurrency_limit = 1
    row.save()
    client, response, _lines = open_stream(key)
    try:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
        refused = raw_post("/v1/chat/completions", key, json=body)
        error = assert_openai_error(refused, 429, "rate_limit_exceeded")
        assert "limit" in error["message"]
    finally:
        response.close()
        client.close()
    assert slots_idle_within(llama, 10)
    answer = api(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert answer.choices[0].message.content is not None


def test_api_requests_wait_in_the_fair_queue(owner_key, llama):
    """Both llama-server slots busy with two API streams: a third request waits in the chat's
    fair queue (in Redis) and starts once they are cancelled."""
    user, row, key = owner_key
    first = open_stream(key)
    second = open_stream(key)
    started = threading.Event()

    def third():
        api(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
        started.set()

    thread = threading.Thread(target=third)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while asyncio.run(queue_state.waiting_count(FairQueue(MODEL))) < 1:  # it reached the line
            assert time.monotonic() < deadline and not started.is_set(), "the third request never waited"
            time.sleep(0.05)
        seen_waiting = time.monotonic()
        assert not started.is_set() and asyncio.run(queue_state.waiting_count(FairQueue(MODEL))) == 1
    finally:
        released = time.monotonic()
        for client, response, _lines in (first, second):
            response.close()
            client.close()
    thread.join(30)
    assert started.is_set()
    # Its ledger row holds its wait: at least the time the test saw it in the line.
    third_row = UsageRecord.objects.get(api_key=row, outcome="ok", output_tokens__lte=2)  # max_tokens=2
    assert third_row.queue_ms >= int((released - seen_waiting) * 1000) and third_row.queue_ms > 0


def test_upstream_killed_mid_stream_ends_with_an_error_event(owner_key, llama):
    _, row, key = owner_key
    stream = api(key).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Tell me a long story about a dragon."}],
        max_tokens=1000,
        seed=3,
        stream=True,
        extra_body=ENDLESS,
    )
    received = 0
    with pytest.raises(openai.APIError) as broken:
        for _chunk in stream:
            received += 1
            if received == 4:
                llama.kill()
    assert received >= 4
    assert "stopped in the middle of the answer" in broken.value.message
    with pytest.raises(openai.APIStatusError) as down:
        api(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert down.value.status_code == 503 and "not reachable" in down.value.message


def test_connect_page_shows_base_url_models_and_snippets(llama):
    http = login(make_user())
    page = http.get("/connect/").text
    assert f"{base_url()}/v1" in page
    assert f"<code>{MODEL}</code>" in page
    assert "from openai import OpenAI" in page and "curl " in page and "/chat/completions" in page
    assert 'href="/keys/"' in http.get("/").text  # the nav links to the keys page
    assert httpx.get(base_url() + "/keys/", timeout=30).status_code in (302, 200)
    anonymous = httpx.get(base_url() + "/connect/", timeout=30, follow_redirects=False)
    assert anonymous.status_code == 302 and "/login/" in anonymous.headers["Location"]
