"""The planner per node: one model and settings planned on each node from that node's own VRAM and RAM.

The nodes here are STAND-INS: Node rows whose registered facts (what a box sends when it joins: its
GPUs, RAM, model files) are written by the test, for boxes this machine cannot be (a 24 GiB GPU, a
2 GiB one). What reads them (the planner page, its plan per node) is the real thing; this box's own
node is planned from what it has now (NVML, psutil).
"""

import os
import re
import time
import uuid

import orjson
import pytest
import redis
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from monitor.catalog.planner import GIB
from monitor.models import Node, Placement, ServerProfile
from monitor.telemetry.live import live_key
from tests.support.synthetic_gguf import Shape, write_model

LONG_CONTEXT = (
    "/monitor/models/planner/?model=toy.gguf&ctx_size=131072&parallel=1&cache_type_k=f16&cache_type_v=f16"
    "&gpu_layers=9&cpu_moe_layers=0&ubatch=512&free_vram_gib=8&margin_gib=1&cache_ram_mib=0&ram_margin_gib=2"
)


def stand_in(name: str, gpus: list[int], ram_gib: int, models: list[str]) -> Node:
    """A STAND-IN node: a Node row with the facts a box of that shape would register."""
    facts = {
        "gpus": [
            {"index": i, "name": f"Stand-in GPU {gib} GiB", "total_bytes": gib * GIB} for i, gib in enumerate(gpus)
        ],
        "gpu_note": "" if gpus else "NVML Shared Library Not Found",
        "ram_bytes": ram_gib * GIB,
        "cpu_cores": 8,
        "llama_server": "version: stand-in",
        "models": [{"name": model, "size": 1, "sha256": ""} for model in models],
    }
    return Node.objects.create(name=name, url="http://192.0.2.1:8081", facts=facts)


@pytest.fixture
def staff():
    user = get_user_model().objects.create_user(f"staff-{uuid.uuid4().hex[:8]}", password="x", is_staff=True)
    client = Client(SERVER_NAME="127.0.0.1")
    client.force_login(user)
    return client


@pytest.fixture
def stand_ins():
    nodes = [
        stand_in("stand-in-gpu-24g", [24], 64, ["toy.gguf"]),
        stand_in("stand-in-gpu-2g", [2], 64, []),
        stand_in("stand-in-cpu", [], 64, ["toy.gguf"]),
    ]
    yield {node.name: node for node in nodes}
    Node.objects.filter(pk__in=[node.pk for node in nodes]).delete()


def node_rows(html: str) -> dict[str, str]:
    table = re.search(r'<table class="grid" id="node-plans">(.*?)</table>', html, re.S).group(1)
    return {name: row for name, row in re.findall(r'<tr data-node="([^"]+)"(.*?)</tr>', table, re.S)}


def test_each_node_is_planned_from_its_own_vram_and_ram(staff, stand_ins, tmp_path):
    write_model(tmp_path / "toy.gguf", Shape("llama"))  # 8 layers: 131072 tokens of f16 cache are 1 GiB
    with override_settings(MODELS_DIR=str(tmp_path)):
        html = staff.get(LONG_CONTEXT).content.decode()
    rows = node_rows(html)
    big, small, cpu = rows["stand-in-gpu-24g"], rows["stand-in-gpu-2g"], rows["stand-in-cpu"]
    # The same plan: it fits on the 24 GiB card as asked; on the 2 GiB card only with fewer GPU layers.
    assert 'data-fits="yes"' in big and "GPU layers: 9, context: 131072" in big
    assert 'data-fits="no"' in small and 'data-advice-fits="yes"' in small
    assert "GPU layers: 4, context: 131072" in small and "VRAM needed: 1.2\xa0GB" in small
    assert "Stand-in GPU 24 GiB: 24.0\xa0GB free of 24.0\xa0GB" in big and "figures: registered totals" in big
    # A box without a GPU says so: every layer on the CPU, planned against its RAM.
    assert 'data-gpu="no"' in cpu and "No GPU: every layer runs on the CPU." in cpu
    assert "NVML Shared Library Not Found" in cpu and "GPU layers: 0, context: 131072" in cpu
    assert 'data-fits="yes"' in cpu
    assert "not on the node" in small and "not on the node" not in big
    assert "figures: now" in next(row for name, row in rows.items() if not name.startswith("stand-in"))


def test_a_small_box_does_not_fit_what_a_large_one_does(staff, stand_ins, tmp_path):
    stand_in_small = stand_ins["stand-in-cpu"]
    stand_in_small.facts["ram_bytes"] = 1 * GIB  # less than the 2 GiB RAM margin
    stand_in_small.save(update_fields=["facts"])
    write_model(tmp_path / "toy.gguf", Shape("llama"))
    with override_settings(MODELS_DIR=str(tmp_path)):
        rows = node_rows(staff.get(LONG_CONTEXT).content.decode())
    assert 'data-fits="no"' in rows["stand-in-cpu"] and "short of RAM" in rows["stand-in-cpu"]
    assert 'data-fits="yes"' in rows["stand-in-gpu-24g"]


def test_a_profile_is_planned_with_its_settings_and_its_nodes_marked(staff, stand_ins, tmp_path):
    write_model(tmp_path / "toy.gguf", Shape("llama"))
    profile = ServerProfile.objects.create(
        name=f"planned-{uuid.uuid4().hex[:6]}", model_file="toy.gguf", ctx_size=131072, parallel=1, gpu_layers="all"
    )
    Placement.objects.create(profile=profile, node=stand_ins["stand-in-gpu-2g"])
    with override_settings(MODELS_DIR=str(tmp_path)):
        moved = staff.get(f"/monitor/models/planner/?profile={profile.pk}")
        assert moved.status_code == 302
        target = moved["Location"]
        assert "ctx_size=131072" in target and "gpu_layers=9" in target and f"profile={profile.pk}" in target
        rows = node_rows(staff.get(target).content.decode())
    assert "serves this profile" in rows["stand-in-gpu-2g"] and "serves this profile" not in rows["stand-in-gpu-24g"]
    assert 'data-fits="no"' in rows["stand-in-gpu-2g"] and 'data-fits="yes"' in rows["stand-in-gpu-24g"]
    profile.delete()


def test_a_node_whose_sampler_reports_is_planned_from_what_it_has_free_now(staff, stand_ins, tmp_path, redis_server):
    """The STAND-IN's newest sample is written where a node's sampler writes it: the planner reads it from
    Redis, so what the node has loaded (20 of its 24 GiB used) counts against it."""
    node = stand_ins["stand-in-gpu-24g"]
    sample = {
        "t": time.time(),
        "host": {"ram_total_bytes": 64 * GIB, "ram_used_bytes": 8 * GIB},
        "gpu": {"available": True, "reason": "", "gpus": [
            {"name": "Stand-in GPU 24 GiB", "total_bytes": 24 * GIB, "used_bytes": 20 * GIB}]},
    }  # fmt: skip
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    client.lpush(live_key(node.name), orjson.dumps(sample))
    try:
        write_model(tmp_path / "toy.gguf", Shape("llama"))
        with override_settings(MODELS_DIR=str(tmp_path)):
            rows = node_rows(staff.get(LONG_CONTEXT).content.decode())
    finally:
        client.delete(live_key(node.name))
    big = rows["stand-in-gpu-24g"]
    assert "figures: now" in big and "Stand-in GPU 24 GiB: 4.0\xa0GB free of 24.0\xa0GB" in big
    assert "figures: registered totals" in rows["stand-in-gpu-2g"]
