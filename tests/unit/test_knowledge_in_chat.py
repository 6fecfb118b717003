"""The chat turn's reading of a question: which collections it mentions, the words searched without the
mentions, and the content terms that make a passage relevant without a reranker."""

import pytest

from chat.knowledge.in_chat import content_terms, mentions, without_mentions


def test_mentions_are_hash_slugs_not_inside_words_or_entities():
    assert mentions("#Handbook and #legal-2024: what is C# or &#35; or ##x?") == ["handbook", "legal-2024"]
    assert mentions("no mention here") == []


def test_the_mentions_asked_are_taken_out_of_the_words_searched():
    assert without_mentions("#handbook what is #other", ["handbook"]) == "what is #other"


def test_content_terms_leave_function_words_and_single_cjk_characters_out():
    assert content_terms("What is the weather like today?") == {"weather", "like", "today"}
    assert content_terms("Tell me about the company") == {"company"}
    assert content_terms("合同的期限") == {"合同", "同的", "的期", "期限"}


def test_numpy_loaded_by_a_product_process_ranks_on_one_thread():
    """A process that loads the product (as Daphne, Celery and manage.py do) gives numpy's OpenBLAS one
    thread: its spinning threads took the cores llama-server was embedding the question on. Counted as
    the threads loading numpy adds to the process."""
    import os
    import subprocess
    import sys

    threads = "int(__import__('re').search(r'Threads:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"
    added = f"before = {threads}; import numpy; print({threads} - before)"
    blas = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
    env = {name: value for name, value in os.environ.items() if name not in blas}

    def threads_added(first: str) -> int:
        code = f"{first}; {added}"
        return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout)

    assert threads_added("import qwenweb") == 0
    if len(os.sched_getaffinity(0)) > 1:  # the check can tell only where OpenBLAS would start more
        assert threads_added("pass") > 0


def test_a_batch_is_asked_again_while_the_model_server_does_not_answer(monkeypatch):
    """Indexing is background work: a model server that does not answer for a moment (its instance loaded
    again; seen in a whole-suite run) is asked again before the document fails, and only a few times.
    The pool and the request are stand-ins here; the error is the one the real client raises."""
    import asyncio

    from chat.knowledge import indexing
    from monitor.public import LlamaError

    calls = []

    async def pool(profile):
        return "pool"

    async def embed(pool, owner, texts, priority):
        calls.append(priority)
        if len(calls) < failures_then_ok:
            raise LlamaError("The model server is not reachable right now.")
        return [[1.0] for _ in texts]

    monkeypatch.setattr(indexing, "serving_pool", pool)
    monkeypatch.setattr(indexing, "embed", embed)
    monkeypatch.setattr(indexing, "EMBED_RETRY_S", 0.0)
    model = type("Model", (), {"profile": None})()

    failures_then_ok = 3  # two failures, then an answer
    assert asyncio.run(indexing._embed_batch(model, "owner:1", ["a", "b"])) == [[1.0], [1.0]]
    assert calls == ["background"] * 3
    calls.clear()
    failures_then_ok = 99  # never answers: the error after EMBED_TRIES asks
    with pytest.raises(LlamaError):
        asyncio.run(indexing._embed_batch(model, "owner:1", ["a"]))
    assert len(calls) == indexing.EMBED_TRIES
