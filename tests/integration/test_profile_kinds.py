"""Embeddings and reranking profiles served by the product's own llama-server (router mode): the seeded
embed-2k loads beside the chat's instance and answers /v1/embeddings with vectors; a reranking profile
answers /v1/rerank; what llama-server says where a model is not made for it."""

from __future__ import annotations

import asyncio
import html
import math
import os
from pathlib import Path

import pytest
from django.conf import settings

from monitor.llama.client import run_with_client
from monitor.llama.errors import LlamaRejected
from monitor.models import ServerProfile
from monitor.profiles.loading import ensure_serving, unload_profile
from monitor.profiles.services import delete_profile, save_profile
from monitor.profiles.validation import validate_profile
from tests.support.client import login, make_user
from tests.support.synthetic_gguf import write_reranker

pytestmark = pytest.mark.usefixtures("redis_server")
MODELS = Path(os.environ["QWENWEB_MODELS_DIR"])
GEMMA_EMBD = 640  # gemma-3-270m's hidden size: the length of its vectors


def served(profile: ServerProfile) -> str:
    return asyncio.run(ensure_serving(profile))


def post(model_id: str, path: str, payload: dict) -> dict:
    return run_with_client(lambda client: client.post_json(path, payload), model=model_id)


@pytest.fixture
def embed_2k(llama):
    profile = ServerProfile.objects.get(name="embed-2k")
    yield profile
    asyncio.run(unload_profile(profile.name))


def test_the_seeded_embeddings_profile_loads_beside_the_chat_and_answers_vectors(llama, embed_2k):
    chat = llama.model_id
    model_id = served(embed_2k)
    models = llama.models()
    assert models[model_id]["value"] == "loaded"
    assert models[chat]["value"] == "loaded"  # its own instance limit: the chat's instance stays
    answer = post(model_id, "/v1/embeddings", {"input": ["The cat sat on the mat.", "Quarterly revenue grew."]})
    vectors = [item["embedding"] for item in answer["data"]]
    assert [item["index"] for item in answer["data"]] == [0, 1]
    assert [len(vector) for vector in vectors] == [GEMMA_EMBD, GEMMA_EMBD]
    assert all(abs(math.sqrt(sum(x * x for x in vector)) - 1) < 1e-3 for vector in vectors)  # normalized
    assert vectors[0] != vectors[1] and answer["usage"]["prompt_tokens"] > 0
    # An embedder is no reranker (llama-server would answer chat with one, though: the gateway refuses it).
    with pytest.raises(LlamaRejected) as refused:
        post(model_id, "/v1/rerank", {"query": "x", "documents": ["a"]})
    assert refused.value.status == 501 and "--reranking" in str(refused.value)


def rerank_profile(name: str, model_file: str) -> ServerProfile:
    profile = ServerProfile(
        name=name, kind=ServerProfile.Kind.RERANK, model_file=model_file, ctx_size=2048, parallel=1,
        batch_size=1024, ubatch_size=1024, threads=2,
    )  # fmt: skip
    validate_profile(profile)
    save_profile(profile)
    return profile


@pytest.fixture
def synthetic_reranker(llama):
    path = write_reranker(MODELS / "synthetic-reranker.gguf")
    profile = rerank_profile("rerank-synthetic", path.name)
    yield profile
    delete_profile(profile)
    path.unlink()


def test_a_reranking_profile_answers_rerank_in_the_shape_dify_sends(synthetic_reranker):
    """A reranker with a classification head (the synthetic qwen3 one: two labels, softmaxed as llama.cpp
    does for Qwen3 rerankers), served by the router with --reranking."""
    model_id = served(synthetic_reranker)
    body = {"query": "Where is the cat?", "documents": ["The cat is on the mat.", "Revenue grew."], "top_n": 2}
    answer = post(model_id, "/v1/rerank", body)
    assert sorted(result["index"] for result in answer["results"]) == [0, 1]
    assert all(0 < result["relevance_score"] < 1 for result in answer["results"])  # a label's probability
    scores = [result["relevance_score"] for result in answer["results"]]
    assert scores == sorted(scores, reverse=True) and answer["usage"]["prompt_tokens"] > 0
    top = post(model_id, "/rerank", {**body, "top_n": 1})
    assert len(top["results"]) == 1


@pytest.fixture
def gemma_reranker(llama):
    profile = rerank_profile("rerank-gemma", settings.DEFAULT_MODEL_FILE)
    yield profile
    delete_profile(profile)


def test_the_default_model_without_a_classification_head_is_still_served_with_reranking(gemma_reranker):
    """What the pinned llama-server does with Gemma 3 270M and --reranking: no refusal; its "scores" are the
    first hidden value of the first token (meaningless), which the Models page's rerankers do not share."""
    model_id = served(gemma_reranker)
    answer = post(model_id, "/v1/rerank", {"query": "x", "documents": ["a", "b"]})
    assert sorted(result["index"] for result in answer["results"]) == [0, 1]


def test_the_staff_pages_make_an_embeddings_profile_refuse_chat_settings_and_show_the_kind(web_server):
    from monitor.web.forms import ServerProfileForm

    seeded = ServerProfile.objects.get(name="embed-2k")
    data = {field: getattr(seeded, field) for field in ServerProfileForm.Meta.fields}
    data = {key: value for key, value in data.items() if value is not False and value is not None}
    http = login(make_user(is_staff=True))
    page = http.get("/monitor/profiles/new/").text
    assert 'name="kind"' in page and 'name="pooling"' in page
    data.update(name="embed-form", pooling="cls", csrfmiddlewaretoken=http.cookies["csrftoken"])
    refused = http.post("/monitor/profiles/new/", data={**data, "draft_model_file": settings.DEFAULT_MODEL_FILE})
    assert "it is for chat profiles only" in html.unescape(refused.text)
    assert not ServerProfile.objects.filter(name="embed-form").exists()
    try:
        saved = http.post("/monitor/profiles/new/", data=data)
        assert 'data-kind="embedding"' in saved.text and "first token (CLS)" in saved.text
        assert "--embeddings --pooling cls" in saved.text  # the command line shown
        listed = http.get("/monitor/profiles/").text
        assert 'data-kind="embedding">embeddings · cls' in listed
        assert '"embed-form": "embeddings"' in http.get("/monitor/").text  # the node cards' kinds
        models = http.get("/monitor/models/").text  # the well-known embedders and rerankers, to download
        for file in ("Qwen3-Embedding-0.6B-Q8_0.gguf", "bge-m3-Q8_0.gguf", "bge-reranker-v2-m3-Q8_0.gguf"):
            assert f'data-file="{file}"' in models and f"/resolve/main/{file}" in models
    finally:
        ServerProfile.objects.filter(name="embed-form").delete()
