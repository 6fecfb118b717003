"""/v1/embeddings and /v1/rerank through the running app, as agent platforms call them: the official
``openai`` client's ``embeddings.create`` against the default install's embeddings profile (the default
model, mean-pooled, served for real by llama-server), vectors equal to llama-server's own, usage counted on
the key; a model of the wrong kind refused naming the ones that answer."""

from __future__ import annotations

import base64
import struct

import httpx
import openai
import pytest

from chat.api.keys import create_key
from chat.models import ApiKey, UsageRecord
from monitor.models import ServerProfile
from tests.support.client import base_url, make_user

pytestmark = pytest.mark.usefixtures("web_server")

EMBEDDER = "embed-2k"
CHAT = "chat-8k"


@pytest.fixture
def key(llama) -> str:
    _row, secret = create_key(make_user(), "knowledge base")
    return secret


def api(key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url() + "/v1", api_key=key, max_retries=0, timeout=120)


def post(path: str, key: str, body: dict) -> httpx.Response:
    return httpx.post(base_url() + path, headers={"Authorization": f"Bearer {key}"}, json=body, timeout=120)


def straight(llama, body: dict) -> dict:
    """The same request sent to llama-server itself (the router, naming the profile's live instance)."""
    from monitor.nodes.registry import placement_here
    from monitor.profiles.presets import live_id

    profile = ServerProfile.objects.get(name=EMBEDDER)
    answer = httpx.post(
        llama.url + "/v1/embeddings",
        headers=llama.headers,
        json={**body, "model": live_id(profile, placement_here(profile))},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)


def test_embeddings_as_the_openai_client_asks_equal_llama_servers_own_and_count_usage(key, llama):
    texts = ["The contract ends in March.", "Holidays are booked on the staff page.", "你好"]
    # The client asks for base64 and decodes it; a list in, one vector per text, in order.
    answer = api(key).embeddings.create(model=EMBEDDER, input=texts)
    assert [item.index for item in answer.data] == [0, 1, 2]
    size = len(answer.data[0].embedding)
    assert size > 100 and all(len(item.embedding) == size for item in answer.data)
    assert answer.usage.prompt_tokens > 0

    # llama-server's own answer to the same request (a text batched with others may differ in the last
    # digits from the same text alone: compared by direction).
    own = straight(llama, {"input": texts, "encoding_format": "float"})
    for ours, theirs in zip(answer.data, own["data"], strict=True):
        assert cosine(ours.embedding, theirs["embedding"]) > 0.9999

    # One text, floats asked for by name; base64 asked for by name is the same vector packed.
    single = post("/v1/embeddings", key, {"model": EMBEDDER, "input": texts[0], "encoding_format": "float"}).json()
    packed = post("/v1/embeddings", key, {"model": EMBEDDER, "input": texts[0], "encoding_format": "base64"}).json()
    raw = base64.b64decode(packed["data"][0]["embedding"])
    assert list(struct.unpack(f"<{len(raw) // 4}f", raw)) == pytest.approx(single["data"][0]["embedding"], abs=1e-6)
    assert cosine(single["data"][0]["embedding"], own["data"][0]["embedding"]) > 0.9999
    assert cosine(own["data"][0]["embedding"], own["data"][1]["embedding"]) < 0.999  # texts apart stay apart

    row = ApiKey.objects.get(prefix=key.split("_")[0].removeprefix("qw-"))
    assert row.requests == 3 and row.prompt_tokens >= answer.usage.prompt_tokens


def test_a_model_of_the_wrong_kind_is_refused_naming_the_ones_that_answer(key):
    refused = post("/v1/embeddings", key, {"model": CHAT, "input": "hello"})
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["code"] == "model_not_supported" and error["param"] == "model"
    assert EMBEDDER in error["message"] and CHAT in error["message"]

    refused = post("/v1/chat/completions", key, {"model": EMBEDDER, "messages": [{"role": "user", "content": "Hi"}]})
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["code"] == "model_not_supported"
    assert CHAT in error["message"] and EMBEDDER not in error["message"].split("do:")[1]

    # No profile serves reranking here: the rerank request says so, in the shape Dify reads.
    body = {"model": CHAT, "query": "What is a panda?", "documents": ["hi", "a bear"], "top_n": 1}
    refused = post("/v1/rerank", key, body)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "model_not_supported"


def test_models_say_what_each_answers(key):
    listed = {model.id: model.model_extra.get("kind") for model in api(key).models.list()}
    assert listed[EMBEDDER] == "embedding" and listed[CHAT] == "chat"


def test_rerank_and_embeddings_requests_are_checked_at_the_border(key):
    def code(path: str, body: dict) -> tuple[int, str | None]:
        response = post(path, key, body)
        return response.status_code, response.json()["error"].get("param")

    assert code("/v1/rerank", {"model": CHAT, "query": "", "documents": ["a"]}) == (400, "query")
    assert code("/v1/rerank", {"model": CHAT, "query": "q", "documents": []}) == (400, "documents")
    assert code("/v1/rerank", {"model": CHAT, "query": "q", "documents": [1]}) == (400, "documents")
    assert code("/v1/rerank", {"model": CHAT, "query": "q", "documents": ["a"], "top_n": 0}) == (400, "top_n")
    assert code("/v1/rerank", {"model": CHAT, "query": "q", "documents": ["a"], "id_slot": 1}) == (400, "id_slot")
    assert code("/v1/embeddings", {"model": EMBEDDER, "input": "a", "encoding_format": "int8"}) == (
        400,
        "encoding_format",
    )
    assert code("/v1/embeddings", {"model": EMBEDDER, "input": "a", "stream": True}) == (400, "stream")


@pytest.fixture
def reranker(llama):
    """A reranking profile of a synthetic qwen3 reranker (a classification head, as Qwen3-Reranker's
    conversion gives), served for real by the router with --reranking."""
    import os
    from pathlib import Path

    from monitor.profiles.services import delete_profile, save_profile
    from monitor.profiles.validation import validate_profile
    from tests.support.synthetic_gguf import write_reranker

    path = write_reranker(Path(os.environ["QWENWEB_MODELS_DIR"]) / "api-reranker.gguf")
    profile = ServerProfile(
        name="rerank-api", kind=ServerProfile.Kind.RERANK, model_file=path.name, ctx_size=2048, parallel=1,
        batch_size=1024, ubatch_size=1024, threads=2,
    )  # fmt: skip
    validate_profile(profile)
    save_profile(profile)
    yield profile.name
    delete_profile(profile)
    path.unlink()


def test_rerank_answers_dify_and_cohere_shaped_requests_best_first_and_counts_usage(key, reranker):
    documents = ["The cat is on the mat.", "Revenue grew in March.", "Cats sleep a lot."]
    # Dify's and FastGPT's request: texts, top_n; they read index and relevance_score.
    answer = post(
        "/v1/rerank", key, {"model": reranker, "query": "Where is the cat?", "documents": documents, "top_n": 2}
    )
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert len(results) == 2 and {result["index"] for result in results} <= {0, 1, 2}
    scores = [result["relevance_score"] for result in results]
    assert scores == sorted(scores, reverse=True) and "document" not in results[0]
    dify_tokens = answer.json()["usage"]["prompt_tokens"]
    assert dify_tokens > 0

    # Cohere's shape: documents as objects, the texts asked back.
    body = {
        "model": reranker,
        "query": "Where is the cat?",
        "documents": [{"text": text} for text in documents],
        "return_documents": True,
    }
    answer = post("/v1/rerank", key, body).json()
    assert len(answer["results"]) == 3
    assert all(result["document"]["text"] == documents[result["index"]] for result in answer["results"])

    row = ApiKey.objects.get(prefix=key.split("_")[0].removeprefix("qw-"))
    assert row.requests == 2 and row.prompt_tokens > 0
    # The ledger: a row each, with the tokens the answer reported.
    dify, cohere = UsageRecord.objects.filter(api_key=row).order_by("id")
    assert {(r.kind, r.profile, r.outcome) for r in (dify, cohere)} == {("api-rerank", reranker, "ok")}
    assert dify.prompt_tokens == dify_tokens and dify.prompt_tokens + cohere.prompt_tokens == row.prompt_tokens
    assert dify.output_tokens == 0 and dify.node
