"""The API's allowlist, output cap, message and media checks, timings removal, requests per
minute and keys per person, through the running app (Daphne, Redis, the real llama-server),
with the official ``openai`` client where it fits."""

import httpx
import openai
import pytest
from django.conf import settings

from chat.api.keys import create_key
from chat.models import ApiKey
from tests.integration.test_api import MODEL, api, assert_openai_error, raw_post
from tests.support.client import base_url, login, make_user

pytestmark = pytest.mark.usefixtures("web_server")
HELLO = [{"role": "user", "content": "Say hello."}]


@pytest.fixture
def owner_key(llama):
    row, key = create_key(make_user(), "hardening")
    return row, key


@pytest.mark.parametrize("field", ["id_slot", "n_probs", "n_predict", "slot_id", "lora", "timings_per_token"])
def test_llama_fields_off_the_allowlist_are_refused_by_name(owner_key, field):
    row, key = owner_key
    with pytest.raises(openai.BadRequestError) as refused:
        api(key).chat.completions.create(model=MODEL, messages=HELLO, max_tokens=2, extra_body={field: 1})
    assert refused.value.param == field and f"'{field}'" in refused.value.message
    row.refresh_from_db()
    assert row.requests == 0  # refused before it reached the model


@pytest.mark.parametrize("value", [1_000_000_000, -1, 0])
def test_output_length_over_the_cap_is_refused_naming_the_cap(owner_key, value):
    _, key = owner_key
    with pytest.raises(openai.BadRequestError) as refused:
        api(key).chat.completions.create(model=MODEL, messages=HELLO, max_tokens=value)
    assert refused.value.param == "max_tokens" and str(settings.API_MAX_TOKENS) in refused.value.message
    with pytest.raises(openai.BadRequestError) as refused:
        api(key).completions.create(model=MODEL, prompt="Hi", max_tokens=value)
    assert refused.value.param == "max_tokens"


@pytest.mark.parametrize(
    "messages,param",
    [([], "messages"), ("hi", "messages"), ([{"role": "user"}], "messages[0].content"), ([{"role": "x", "content": "a"}], "messages[0].role")],
)  # fmt: skip
def test_empty_or_malformed_messages_are_400(owner_key, messages, param):
    _, key = owner_key
    error = assert_openai_error(raw_post("/v1/chat/completions", key, json={"model": MODEL, "messages": messages}), 400)
    assert error["param"] == param and error["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "part,words",
    [
        ({"type": "image_url", "image_url": {"url": "http://10.0.0.1/x.png"}}, "Unsupported image_url URL"),
        ({"type": "input_audio", "input_audio": {"data": "https://10.0.0.1/a.wav", "format": "wav"}}, "Unsupported input_audio URL"),
        ({"type": "input_video", "input_video": {"data": "file:///etc/passwd"}}, "Unsupported input_video URL"),
        ({"type": "video_url", "video_url": {"url": "http://10.0.0.1/v.mp4"}}, "Unsupported video_url URL"),
        ({"type": "input_file", "input_file": {"file_url": "http://10.0.0.1/f.pdf"}}, "not a supported content part"),
    ],
)  # fmt: skip
def test_media_parts_of_every_type_must_be_inline(owner_key, part, words):
    row, key = owner_key
    body = {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "text", "text": "see"}, part]}]}
    error = assert_openai_error(raw_post("/v1/chat/completions", key, json=body), 400)
    assert words in error["message"]
    row.refresh_from_db()
    assert row.requests == 0


def test_answers_carry_no_timings_and_usage_is_still_counted(owner_key, llama):
    row, key = owner_key
    body = {"model": MODEL, "messages": HELLO, "max_tokens": 4, "seed": 1}
    direct = httpx.post(
        llama.url + "/v1/chat/completions", json={**body, "model": llama.model_id}, headers=llama.headers, timeout=60
    )
    # What llama-server itself sends, and the gateway removes: how much of the prompt was cached.
    assert "cache_n" in direct.json()["timings"] and "cached_tokens" in direct.json()["usage"]["prompt_tokens_details"]
    plain = raw_post("/v1/chat/completions", key, json=body)
    assert plain.status_code == 200 and "timings" not in plain.json() and "cache_n" not in plain.text
    assert "cached_tokens" not in plain.text and plain.json()["usage"]["completion_tokens"] > 0
    with httpx.stream(
        "POST", base_url() + "/v1/chat/completions",
        json={**body, "stream": True, "stream_options": {"include_usage": True}},
        headers={"Authorization": f"Bearer {key}"}, timeout=120,
    ) as streamed:  # fmt: skip
        relayed = streamed.read()
    assert relayed.rstrip().endswith(b"data: [DONE]") and b"cache_n" not in relayed and b'"timings"' not in relayed
    assert b"cached_tokens" not in relayed and b'"completion_tokens"' in relayed
    row.refresh_from_db()
    assert row.requests == 2 and row.prompt_tokens >= 2 * plain.json()["usage"]["prompt_tokens"] > 0


def test_requests_per_key_per_minute_is_429_with_retry_after(owner_key):
    row, key = owner_key
    limit = settings.API_KEY_RPM
    with httpx.Client(base_url=base_url(), headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        for _ in range(limit):
            assert http.get("/v1/models").status_code == 200
        refused = http.get("/v1/models")
    error = assert_openai_error(refused, 429, "rate_limit_exceeded")
    assert f"{limit} requests in the last minute" in error["message"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    with pytest.raises(openai.RateLimitError):
        api(key).chat.completions.create(model=MODEL, messages=HELLO, max_tokens=2)
    other_row, other_key = create_key(row.owner, "another")  # the limit is per key
    assert httpx.get(base_url() + "/v1/models", headers={"Authorization": f"Bearer {other_key}"}).status_code == 200


def test_keys_per_person_are_limited_and_the_page_says_so(web_server):
    person = make_user()
    for index in range(settings.MAX_API_KEYS_PER_USER):
        create_key(person, f"agent {index}")
    http = login(person)
    page = http.post(
        "/keys/new/", data={"name": "one too many", "csrfmiddlewaretoken": http.cookies["csrftoken"]},
        headers={"Referer": base_url() + "/keys/"},
    )  # fmt: skip
    assert f"You have {settings.MAX_API_KEYS_PER_USER} API keys, the most one person may have" in page.text
    limits = f"You may hold {settings.MAX_API_KEYS_PER_USER} keys that are not revoked."
    assert limits in page.text and f"Each key may make {settings.API_KEY_RPM} requests a minute." in page.text
    assert not ApiKey.objects.filter(owner=person, name="one too many").exists()
    http.post(
        f"/keys/{ApiKey.objects.filter(owner=person).first().pk}/revoke/",
        data={"csrfmiddlewaretoken": http.cookies["csrftoken"]}, headers={"Referer": base_url() + "/keys/"},
    )  # fmt: skip
    page = http.post(
        "/keys/new/", data={"name": "after revoking", "csrfmiddlewaretoken": http.cookies["csrftoken"]},
        headers={"Referer": base_url() + "/keys/"},
    )  # fmt: skip
    assert page.status_code == 201 and ApiKey.objects.filter(owner=person, name="after revoking").exists()
