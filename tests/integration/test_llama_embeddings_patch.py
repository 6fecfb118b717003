"""qwenweb's one change to llama.cpp (qwenweb/patches/llama_embeddings.py), in the llama-server the tests
run: a pooled embedding's graph leaves the output layer out (llama-server says so once in its log), and
the pooled vector is still the mean of the model's per-token rows, which the same binary gives with
pooling ``none`` (where the patch changes nothing); Qwen3's graph (a synthetic qwen3 reranker) leaves it
out too and still ranks; the build refuses a source it was not written for."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import httpx
import numpy as np
import pytest
from django.conf import settings

from qwenweb.patches import llama_embeddings
from scripts.build_llama_server import SDIST_NAME, cache_root, fetch_sdist, pinned_text
from tests.support import stack
from tests.support.synthetic_gguf import write_reranker

BINARY = os.environ["LLAMA_SERVER_BIN"]
TEXTS = ["The contract ends in March.", "Holidays are booked on the staff page, two weeks ahead.", "你好"]


def serve(run_dir: Path, name: str, *kind: str, model: Path | None = None) -> stack.PlainLlamaServer:
    """llama-server with ``kind`` (its embeddings or reranking options) and its debug log."""
    port = stack.free_port()
    model = model or Path(settings.MODELS_DIR) / settings.DEFAULT_MODEL_FILE
    argv = [BINARY, "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "1024", "-np", "1"]
    server = stack.PlainLlamaServer(
        run_dir, [*argv, "-t", "2", *kind, "--verbose"], dict(os.environ), f"http://127.0.0.1:{port}", name=name
    )
    server.start()
    return server


def rows(server: stack.PlainLlamaServer, text: str) -> np.ndarray:
    answer = httpx.post(server.url + "/embeddings", json={"content": text}, timeout=120)
    assert answer.status_code == 200, answer.text
    return np.array(answer.json()[0]["embedding"], dtype=np.float64)


def test_a_pooled_embedding_leaves_the_output_layer_out_and_is_the_mean_of_the_token_rows(run_dir):
    pooled = serve(run_dir, "llama-embeddings-mean", "--embeddings", "--pooling", "mean")
    tokens = serve(run_dir, "llama-embeddings-none", "--embeddings", "--pooling", "none")
    try:
        for text in TEXTS:
            vector, per_token = rows(pooled, text)[0], rows(tokens, text)
            assert per_token.shape[0] > 1 and per_token.shape[1] == vector.shape[0]
            mean = per_token.mean(axis=0)
            cosine = float(vector @ mean / np.linalg.norm(vector) / np.linalg.norm(mean))
            assert cosine > 0.9999, (text, cosine)
    finally:
        pooled.stop()
        tokens.stop()
    assert llama_embeddings.SAID in pooled.log_path.read_text(errors="replace")
    assert llama_embeddings.SAID not in tokens.log_path.read_text(errors="replace")


def test_a_qwen3_reranker_leaves_it_out_too_and_still_ranks(run_dir, tmp_path):
    """Qwen3's graph (Qwen3-Reranker, Qwen3-Embedding): the synthetic qwen3 reranker with rank pooling."""
    reranker = serve(run_dir, "llama-reranker", "--reranking", model=write_reranker(tmp_path / "reranker.gguf"))
    try:
        body = {"query": "Where is the cat?", "documents": ["The cat is on the mat.", "Revenue grew."]}
        answer = httpx.post(reranker.url + "/v1/rerank", json=body, timeout=120)
        assert answer.status_code == 200, answer.text
        assert all(0 < result["relevance_score"] < 1 for result in answer.json()["results"])
    finally:
        reranker.stop()
    assert llama_embeddings.SAID in reranker.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def pinned():
    work = cache_root() / "build"
    with tarfile.open(work / SDIST_NAME if (work / SDIST_NAME).exists() else fetch_sdist(work)) as archive:
        texts = {name: pinned_text(archive, name) for name in llama_embeddings.FILES}
    return texts.__getitem__


def test_the_build_writes_the_change_from_the_pinned_source_and_refuses_another(tmp_path, pinned):
    for name in llama_embeddings.FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "src/models/gemma3.cpp").write_text("// a tree changed by hand")
    llama_embeddings.apply(tmp_path, pinned)
    for name in llama_embeddings.FILES:
        text = (tmp_path / name).read_text()
        assert text.count(llama_embeddings.MARK) == 1 and text.count("// lm_head") == 1
        assert text == pinned(name).replace(llama_embeddings.ANCHOR, llama_embeddings.INSERT)
    with pytest.raises(SystemExit, match="written for another src/models/gemma3.cpp"):
        llama_embeddings.apply(tmp_path, lambda name: pinned(name).replace("// lm_head", "// output layer"))
