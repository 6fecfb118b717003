"""The gateway's checks and stream tally, without services."""

import orjson
import pytest
from django.conf import settings

from chat.api import request_fields, tally
from chat.api.errors import ApiError
from chat.api.keys import KEY_PREFIX, create_key
from chat.models import ApiKey
from monitor.llama.errors import rejection_from
from tests.support.client import make_user


def refusal(endpoint: str, body: dict) -> ApiError:
    with pytest.raises(ApiError) as refused:
        request_fields.check_parameters(endpoint, body)
    assert refused.value.status == 400
    return refused.value


def test_parse_body_refuses_bad_json_and_size(monkeypatch):
    assert request_fields.parse_body(b'{"model": "x"}') == {"model": "x"}
    assert refusal_of(b"{nope").body()["error"]["code"] == "invalid_json"
    assert "JSON object" in str(refusal_of(b'"text"'))
    monkeypatch.setattr(settings, "API_MAX_BODY_BYTES", 1_048_576)
    error = refusal_of(b" " * (1_048_576 + 1))
    assert error.body()["error"]["code"] == "request_too_large" and "1 MB" in str(error)


def refusal_of(raw: bytes) -> ApiError:
    with pytest.raises(ApiError) as refused:
        request_fields.parse_body(raw)
    return refused.value


def test_checks_name_the_parameter():
    ok = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    request_fields.check_parameters("chat/completions", ok)
    request_fields.check_parameters(
        "chat/completions", {**ok, "n": 1, "stream": True, "tools": [], "response_format": {}}
    )
    assert refusal("chat/completions", {**ok, "n": 3}).param == "n"
    assert refusal("completions", {"model": "m", "prompt": "x", "suffix": "y"}).param == "suffix"
    assert refusal("completions", {"model": "m", "prompt": "x", "echo": True}).param == "echo"
    assert refusal("embeddings", {"model": "m", "input": "x", "stream": True}).param == "stream"
    assert refusal("chat/completions", {"messages": []}).param == "model"
    assert refusal("chat/completions", {"model": 5, "messages": []}).param == "model"
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    error = refusal("chat/completions", {"model": "m", "messages": [{"role": "user", "content": [remote]}]})
    assert error.param == "image_url" and "data: URL" in str(error)
    inline = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    request_fields.check_parameters(
        "chat/completions", {"model": "m", "messages": [{"role": "user", "content": [inline]}]}
    )
    local = {"type": "input_audio", "input_audio": {"url": "file:///etc/passwd"}}
    assert refusal("embeddings", {"model": "m", "input": [{"content": [local]}]}).param == "input_audio"


def event(chunk: dict) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def test_stream_tally_finds_the_end_and_the_figures_across_reads():
    stream = (
        event({"choices": [{"delta": {"content": 'say "usage" and "timings"'}}]})
        + event({"choices": [{"delta": {}, "finish_reason": "stop"}], "timings": {"prompt_n": 7, "cache_n": 3, "predicted_n": 2}})
        + b"data: [DONE]\n\n"
    )  # fmt: skip
    counter = tally.StreamTally()
    for start in range(0, len(stream), 5):  # split at awkward places
        counter.feed(stream[start : start + 5])
    assert counter.finished and counter.events == 3
    assert counter.usage() == (10, 2)

    usage_chunk = event({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 4}})
    counter = tally.StreamTally()
    counter.feed(usage_chunk + b"data: [DONE]\n\n")
    assert counter.usage() == (11, 4)


def test_stream_tally_cut_short_counts_events_and_is_unfinished():
    counter = tally.StreamTally()
    counter.feed(event({"choices": [{"delta": {"content": "a"}}]}) * 3 + b"data: {")
    assert not counter.finished and counter.usage() == (0, 3)
    counter.feed(b'"error": {"message": "boom"}}\n\n')
    assert counter.finished  # llama-server's own error event ends the stream; nothing is added


def test_stream_tally_relays_token_reads_as_they_came_and_rewrites_only_the_figures():
    tokens = [event({"choices": [{"delta": {"content": text}}]}) for text in ("a", ' "[DONE]', ' "error"')]
    counter = tally.StreamTally()
    for read in (tokens[0], tokens[2]):
        assert counter.feed(read) is read  # the same bytes object: no copy, no re-encoding
    assert counter.feed(tokens[1]) == tokens[1] and not counter.finished  # a text saying [DONE] ends nothing
    last = event({"choices": [], "timings": {"prompt_n": 5, "cache_n": 9, "predicted_n": 3}, "tokens_cached": 9})
    relayed = counter.feed(last + b"data: [DONE]\n\n")
    assert (
        b"cache_n" not in relayed
        and b"tokens_cached" not in relayed
        and counter.end == b"data: [DONE]\n\n"
        and b"[DONE]" not in relayed
    )
    assert counter.finished and counter.events == 5 and counter.usage() == (14, 3)


def test_stream_tally_fast_path_never_relays_half_an_event():
    counter = tally.StreamTally()
    assert counter.feed(b'data: {"choices": []}\n\ndata: {"cho') == b'data: {"choices": []}\n\n'
    assert counter.feed(b'ices": []}\n\n') == b'data: {"choices": []}\n\n'
    assert counter.events == 2


def test_upstream_errors_keep_llama_servers_body_and_status():
    body = {
        "error": {"code": 400, "message": "the request exceeds the context size", "type": "exceed_context_size_error"}
    }
    error = ApiError.from_upstream(rejection_from(400, orjson.dumps(body)))
    assert error.status == 400 and error.body() == body
    plain = ApiError.from_upstream(rejection_from(502, b"<html>bad gateway</html>"))
    assert plain.status == 502 and plain.body()["error"]["type"] == "server_error"
    assert plain.sse_event().startswith(b'data: {"error":') and plain.sse_event().endswith(b"\n\n")


def test_keys_are_random_and_only_their_hash_is_stored():
    user = make_user()
    first, key = create_key(user, "script")
    _, other = create_key(user, "other")
    assert key.startswith(KEY_PREFIX) and key != other and len(key) > 40
    stored = ApiKey.objects.get(pk=first.pk)
    assert key not in (stored.key_hash, stored.prefix, stored.name) and len(stored.key_hash) == 64
    assert stored.concurrency_limit == 4 and stored.requests == 0


def test_authenticate_checks_the_whole_key():
    from chat.api.keys import bearer_key, caller_of, revoke_key

    def authenticate(header):
        return caller_of(bearer_key(header))

    user = make_user()
    row, key = create_key(user, "script")
    assert authenticate(f"Bearer {key}").id == row.id
    for header in (None, "", "Bearer", f"Token {key}", f"Bearer {key}x", f"Bearer {key[:-1]}"):
        with pytest.raises(ApiError) as refused:
            authenticate(header)
        assert refused.value.status == 401
    revoke_key(user, row.id)
    with pytest.raises(ApiError, match="revoked"):
        authenticate(f"Bearer {key}")
