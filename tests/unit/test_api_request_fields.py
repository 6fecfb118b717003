"""The API's request allowlist, message shapes, media checks, output cap and timings removal, without services."""

import orjson
import pytest
from django.conf import settings

from chat.api import request_fields, tally
from chat.api.errors import ApiError

OK = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def refusal(endpoint: str, body: dict) -> ApiError:
    with pytest.raises(ApiError) as refused:
        request_fields.check_parameters(endpoint, body)
    assert refused.value.status == 400
    return refused.value


@pytest.mark.parametrize("field", ["id_slot", "n_probs", "n_predict", "slot_id", "lora", "timings_per_token", "n_cmpl"])
def test_fields_off_the_allowlist_are_refused_by_name(field):
    error = refusal("chat/completions", {**OK, field: 1})
    assert error.param == field and f"'{field}'" in str(error)
    assert refusal("completions", {"model": "m", "prompt": "x", field: 1}).param == field


def test_openai_fields_and_the_documented_llama_extras_pass():
    extras = {
        "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.1, "grammar": 'root ::= "a"', "json_schema": {},
        "cache_prompt": True, "typical_p": 1.0, "mirostat": 0, "reasoning_format": "none", "stop": ["x"],
        "tools": [], "tool_choice": "auto", "response_format": {"type": "json_object"}, "seed": 1, "logprobs": False,
    }  # fmt: skip
    request_fields.check_parameters("chat/completions", {**OK, **extras})
    request_fields.check_parameters("embeddings", {"model": "m", "input": ["a", "b"], "encoding_format": "float"})
    assert refusal("embeddings", {"model": "m", "input": "a", "top_k": 3}).param == "top_k"


def test_top_logprobs_is_held_to_openais_range():
    request_fields.check_parameters("chat/completions", {**OK, "logprobs": True, "top_logprobs": 20})
    for value in (21, -1, 1000, "5", True):
        assert refusal("chat/completions", {**OK, "logprobs": True, "top_logprobs": value}).param == "top_logprobs"


def test_output_length_is_capped_and_sent_when_absent():
    cap = settings.API_MAX_TOKENS
    body = dict(OK)
    request_fields.check_parameters("chat/completions", body)
    assert body["max_tokens"] == cap  # llama-server never runs unbounded
    request_fields.check_parameters("chat/completions", {**OK, "max_tokens": cap})
    for field in ("max_tokens", "max_completion_tokens"):
        for value in (cap + 1, -1, 0, 1_000_000_000, "12", True, 1.5):
            error = refusal("chat/completions", {**OK, field: value})
            assert error.param == field and str(cap) in str(error), (field, value)
    body = {**OK, "max_completion_tokens": 5}
    request_fields.check_parameters("chat/completions", body)
    assert "max_tokens" not in body


@pytest.mark.parametrize(
    "messages,param",
    [
        ([], "messages"),
        ("hi", "messages"),
        (None, "messages"),
        (["hi"], "messages[0]"),
        ([{"role": "wizard", "content": "x"}], "messages[0].role"),
        ([{"content": "x"}], "messages[0].role"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user", "content": None}], "messages[0].content"),
        ([{"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "text", "text": 3}]}], "messages[1].content"),
    ],
)  # fmt: skip
def test_malformed_messages_are_refused(messages, param):
    assert refusal("chat/completions", {"model": "m", "messages": messages}).param == param


def test_assistant_tool_call_turn_without_content_passes():
    tool_turn = {"role": "assistant", "content": None, "tool_calls": []}
    request_fields.check_parameters("chat/completions", {"model": "m", "messages": [OK["messages"][0], tool_turn]})


def user(*parts) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": list(parts)}]}


@pytest.mark.parametrize(
    "part,param",
    [
        ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}, "image_url"),
        ({"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}, "image_url"),
        ({"type": "image_url", "image_url": "http://10.0.0.1/x.png"}, "image_url"),
        ({"type": "image_url", "image_url": {"url": "QUFBQQ=="}}, "image_url"),  # image_url takes a data: URL only
        ({"type": "input_audio", "input_audio": {"data": "http://10.0.0.1/a.wav", "format": "wav"}}, "input_audio"),
        ({"type": "input_audio", "input_audio": {"url": "https://x/a.wav"}}, "input_audio"),
        ({"type": "input_video", "input_video": {"data": "https://x/v.mp4"}}, "input_video"),
        ({"type": "input_video", "input_video": {"url": "/etc/passwd"}}, "input_video"),
        ({"type": "video_url", "video_url": {"url": "http://x/v.mp4"}}, "video_url"),
        ({"type": "file", "file": {"file_data": "x"}}, "messages[0].content"),
        ({"type": "image", "source": {"type": "url", "url": "http://x"}}, "messages[0].content"),
    ],
)
def test_every_media_part_must_be_inline(part, param):
    error = refusal("chat/completions", user(part))
    assert error.param == param, error


def test_inline_media_passes():
    request_fields.check_parameters(
        "chat/completions",
        user(
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}},
        ),
    )


def test_prompt_and_input_shapes():
    request_fields.check_parameters("completions", {"model": "m", "prompt": [1, 2, 3]})
    request_fields.check_parameters("embeddings", {"model": "m", "input": [[1, 2], [3]]})
    remote = {"type": "image_url", "image_url": {"url": "http://x/y.png"}}
    assert refusal("embeddings", {"model": "m", "input": [{"content": [remote]}]}).param == "image_url"
    assert refusal("completions", {"model": "m", "prompt": [{"multimodal_data": ["x"]}]}).param == "prompt"
    assert refusal("completions", {"model": "m"}).param == "prompt"
    assert refusal("embeddings", {"model": "m", "input": []}).param == "input"


def event(chunk: dict) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def test_streamed_timings_are_removed_and_still_counted():
    final = {
        "choices": [{"delta": {}, "finish_reason": "stop"}],
        "timings": {"prompt_n": 7, "cache_n": 3, "predicted_n": 2},
    }
    text = event({"choices": [{"delta": {"content": 'say "timings"'}}]})
    usage = {
        "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 3}},
    }
    stream = text + event(final) + event(usage) + b"data: [DONE]\n\n"
    counter = tally.StreamTally()
    relayed = b"".join(counter.feed(stream[start : start + 7]) for start in range(0, len(stream), 7))
    assert relayed.startswith(text)  # events without figures pass through byte for byte
    assert b"cache_n" not in relayed and b'"timings"' not in relayed.replace(text, b"")
    assert b"cached_tokens" not in relayed and b'"completion_tokens":2' in relayed
    assert counter.end == b"data: [DONE]\n\n" and b"[DONE]" not in relayed and b'"finish_reason":"stop"' in relayed
    assert counter.usage() == (10, 2)


def test_a_stream_that_ends_without_its_blank_line_is_still_relayed():
    counter = tally.StreamTally()
    assert counter.feed(b"data: [DONE]") == b""
    assert counter.close() == b"" and counter.finished and counter.end == b"data: [DONE]\n\n"
