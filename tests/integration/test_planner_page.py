"""The planner page explains a hybrid MoE plan layer by layer, with llama.cpp's own compute projection."""

import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from tests.support.synthetic_gguf import Shape, write_model

BASE = (
    "/monitor/models/planner/?model={name}&ctx_size=4096&parallel=2&cache_type_k=q8_0&cache_type_v=q8_0"
    "&gpu_layers=0&cpu_moe_layers=0&ubatch=512&free_vram_gib=8&margin_gib=1"
)


@pytest.fixture
def staff():
    user = get_user_model().objects.create_user(f"staff-{uuid.uuid4().hex[:8]}", password="x", is_staff=True)
    client = Client(SERVER_NAME="127.0.0.1")  # a host the box answers to (ALLOWED_HOSTS is not "*")
    client.force_login(user)
    return client


def page(client: Client, models_dir, name: str, extra: str = "") -> str:
    with override_settings(MODELS_DIR=str(models_dir)):
        response = client.get(BASE.format(name=name) + extra)
    assert response.status_code == 200
    return response.content.decode()


def cells(html: str, row_class: str) -> list[list[str]]:
    rows = re.findall(rf'<tr class="kind-{row_class}">(.*?)</tr>', html, re.S)
    return [re.findall(r"<td>(.*?)</td>", row, re.S) for row in rows]


def test_hybrid_moe_plan_layer_by_layer(staff, tmp_path):
    write_model(tmp_path / "hybrid.gguf", Shape("qwen35moe", n_layer=8, nextn=1))
    html = page(staff, tmp_path, "hybrid.gguf")
    assert "6 recurrent" in html and "2 full attention" in html and "MTP blocks: 1" in html
    attention, recurrent, mtp = cells(html, "attention"), cells(html, "recurrent"), cells(html, "mtp")
    assert len(attention) == 2 and len(recurrent) == 6 and len(mtp) == 1
    assert all(row[-1] == "0" for row in attention)  # no recurrent state on attention layers
    assert "MTP (not loaded: MTP off)" in mtp[0][1]
    flags = re.search(r'<pre class="flags" id="plan-flags">(.*?)</pre>', html).group(1)
    assert flags == "--n-gpu-layers 0 --ctx-size 4096 --parallel 2 --cache-type-k q8_0 --cache-type-v q8_0"
    assert "Compute buffers (llama.cpp's graphs, replayed)" in html
    assert 'id="ram-plan"' in html and "Context checkpoints, all kept" in html
    assert "cannot tell without the memory bandwidth" in html
    with_mtp = page(staff, tmp_path, "hybrid.gguf", "&mtp=on&gpu_bandwidth_gbs=400&ram_bandwidth_gbs=50")
    assert "MTP (loaded)" in with_mtp and "--spec-type draft-mtp" in with_mtp
    assert "Expected decode speed: on the order of" in with_mtp


def test_compute_comes_from_llama_cpp_when_asked(staff, tmp_path):
    write_model(tmp_path / "hybrid.gguf", Shape("qwen35moe", n_layer=8, nextn=1))
    html = page(staff, tmp_path, "hybrid.gguf", "&ask_llama=on")
    assert "Compute buffers (projected by llama.cpp)" in html
    assert 'id="projection-problem"' not in html


def test_unknown_architecture_and_failed_projection_are_named(staff, tmp_path):
    path = write_model(tmp_path / "odd.gguf", Shape("llama"))
    path.write_bytes(path.read_bytes().replace(b"llama", b"zzzzz"))
    html = page(staff, tmp_path, "odd.gguf", "&ask_llama=on")
    assert "does not know how llama.cpp caches architecture zzzzz" in html
    # llama-server cannot load it: the page says so and falls back to the estimate.
    assert "The llama.cpp projection is not available" in html and "Compute buffers (estimate)" in html
    assert 'id="no-advice"' in html and 'id="advice"' not in html  # no confident recommendation either
