"""Per-layer facts read the way llama.cpp reads them: arrays as well as scalars."""

from monitor.catalog.gguf_header import ArrayInfo
from monitor.catalog.layers import ATTENTION, MTP, RECURRENT, SLIDING, Metadata, layer_facts


def facts(arch: str, **keys):
    metadata = {f"{arch}.{key}": value for key, value in keys.items()}
    return layer_facts(Metadata(metadata, arch), keys.get("block_count", 6), keys.get("attention.sliding_window", 0))


def test_per_layer_kv_heads_and_recurrent_layers_from_arrays():
    got = facts(
        "qwen35moe",
        block_count=6,
        nextn_predict_layers=1,
        **{
            "attention.head_count": 16,
            "attention.head_count_kv": ArrayInfo(6, [0, 0, 4, 0, 2, 2]),
            "attention.recurrent_layers": ArrayInfo(6, [1, 1, 0, 1, 0, 0]),
        },
    )
    assert got.kinds == [RECURRENT, RECURRENT, ATTENTION, RECURRENT, ATTENTION, MTP]
    assert got.head_count_kv == [0, 0, 4, 0, 2, 2] and got.head_count == [16] * 6 and got.covered


def test_full_attention_interval_and_sliding_pattern():
    hybrid = facts("qwen3next", block_count=8, full_attention_interval=2)
    assert hybrid.kinds == [RECURRENT, ATTENTION] * 4 and hybrid.nextn_layers == 0
    gemma = facts("gemma3", block_count=7, **{"attention.sliding_window": 512, "attention.head_count_kv": 1})
    assert gemma.kinds == [SLIDING] * 5 + [ATTENTION, SLIDING] and gemma.head_count_kv == [1] * 7


def test_hostile_values_do_not_pass_as_numbers():
    odd = facts("mamba9", block_count=3, **{"attention.head_count": "many", "nextn_predict_layers": 99})
    assert odd.head_count == [0, 0, 0] and odd.nextn_layers == 3 and not odd.covered
