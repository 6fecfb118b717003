"""The VRAM planner against the buffer sizes the real llama-server prints when it loads."""

import os
from pathlib import Path

from monitor.catalog.advice import recommend
from monitor.catalog.planner import GIB, MIB, PlanRequest, plan
from monitor.catalog.registry import NotGGUF, read_model_info, scan_models
from tests.support.planner_check import CASES, compare

MODEL = Path(os.environ["QWENWEB_MODELS_DIR"]) / "gemma-3-270m-q4_k_m.gguf"


def test_planner_matches_llama_server_within_3_percent():
    """Weights, KV cache and the compute buffer (llama.cpp's graph replayed) of the default model."""
    rows = [row for row in compare(MODEL) if row["counted"]]
    assert len(rows) == 3 * len(CASES) and {row["figure"] for row in rows} == {"weights", "kv_cache", "compute"}
    worst = max(rows, key=lambda row: row["error_pct"])
    assert worst["error_pct"] <= 3, worst


def test_registry_reads_metadata_without_loading_weights(tmp_path):
    info = read_model_info(MODEL)
    assert (info.architecture, info.quantization, info.n_layer) == ("gemma3", "Q4_K_M", 18)
    assert (info.n_head, info.n_head_kv, info.head_dim_k, info.sliding_window) == (4, 1, 256, 512)
    assert info.vocab_size == 262144 and not info.has_chat_template and info.mmproj is None
    assert sum(info.swa_layers) == 15  # every 6th layer attends to the whole context
    assert 260e6 < info.parameters < 280e6
    # A broken file beside it is reported, not listed.
    (tmp_path / "model.gguf").symlink_to(MODEL)
    (tmp_path / "broken.gguf").write_bytes(b"<html>not found</html>")
    models, skipped = scan_models(tmp_path)
    assert [m.path.name for m in models] == ["model.gguf"]
    assert skipped and "not a GGUF file" in skipped[0][1]


def test_not_gguf_is_refused(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 20)
    try:
        read_model_info(bad)
    except NotGGUF as error:
        assert "cannot be read" in str(error)
    else:
        raise AssertionError("a truncated header was accepted")


def test_offloading_moves_layers_and_their_cache_to_the_gpu():
    info = read_model_info(MODEL)
    cpu_only = plan(info, PlanRequest(ctx_size=8192))
    half = plan(info, PlanRequest(ctx_size=8192, gpu_layers=9))
    everything = plan(info, PlanRequest(ctx_size=8192, gpu_layers=info.n_layer + 1))
    assert cpu_only.vram == 0 and cpu_only.kv_gpu == 0
    assert 0 < half.kv_gpu < everything.kv_gpu == everything.kv_total
    assert half.weights_gpu == sum(info.layer_bytes[9:])
    # Tied embeddings: the offloaded output layer carries a copy of token_embd.
    assert everything.weights_gpu == sum(info.layer_bytes) + info.output_bytes + info.input_bytes


def test_recommendation_fits_the_budget_with_its_margin():
    info = read_model_info(MODEL)
    small = recommend(info, PlanRequest(ctx_size=4096), free_vram=GIB + 200 * MIB)
    assert small.fits and small.plan.vram <= 200 * MIB and small.gpu_layers < info.n_layer + 1
    roomy = recommend(info, PlanRequest(ctx_size=4096), free_vram=4 * GIB)
    assert roomy.gpu_layers == info.n_layer + 1 and roomy.ctx_size == info.context_length
    none = recommend(info, PlanRequest(ctx_size=4096), free_vram=GIB)
    assert none.gpu_layers == 0
