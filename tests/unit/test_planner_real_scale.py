"""The planner and its advice at the real Qwen3.6-35B-A3B scale, from a header-only file (no load)."""

from monitor.catalog.advice import decode_speed, recommend
from monitor.catalog.layers import ATTENTION, MTP
from monitor.catalog.planner import GIB, MIB, PlanRequest, plan
from tests.support.real_scale import qwen36_35b_a3b

Q8 = {"cache_type_k": "q8_0", "cache_type_v": "q8_0"}


def test_cache_is_charged_to_the_ten_attention_layers_only():
    info = qwen36_35b_a3b()
    assert info.layer_kinds.count(ATTENTION) == 10 and info.recurrent_layers == 30 and info.layer_kinds[-1] == MTP
    everything = plan(info, PlanRequest(ctx_size=32768, gpu_layers=info.n_layer + 1))
    assert everything.kv_total == 640 * MIB  # 10 layers x 2 heads x 256 x (K + V) x f16 x 32K; not 2560
    assert 62 * MIB < everything.recurrent_total < 64 * MIB  # about 63 MiB per slot, F32
    assert plan(info, PlanRequest(ctx_size=32768, parallel=3)).recurrent_total == 3 * everything.recurrent_total
    assert everything.rows[-2].weights_gpu == 0 and not everything.rows[-2].loaded  # MTP block: off by default


def test_eight_gigabytes_hold_128k_with_q8_cache_by_keeping_experts_in_ram():
    info = qwen36_35b_a3b()
    advice = recommend(info, PlanRequest(ctx_size=131072, **Q8), free_vram=8 * GIB)
    assert advice.fits and advice.gpu_layers == info.n_layer + 1  # no layer leaves the GPU...
    assert 0 < advice.cpu_moe_layers < info.n_layer  # ...some experts do, not all of them
    assert advice.ctx_size >= 131072 and advice.plan.vram <= 7 * GIB
    assert advice.max_context >= 131072
    # One layer's experts fewer in RAM would not fit: the advice uses the GPU fully.
    tighter = plan(info, PlanRequest(ctx_size=advice.ctx_size, gpu_layers=advice.gpu_layers,
                                     cpu_moe_layers=advice.cpu_moe_layers - 1, **Q8))  # fmt: skip
    assert tighter.vram > 7 * GIB


def test_decode_speed_is_an_order_of_magnitude_or_unknown():
    info = qwen36_35b_a3b()
    request = PlanRequest(ctx_size=131072, gpu_layers=info.n_layer + 1, cpu_moe_layers=info.n_layer, **Q8)
    speed = decode_speed(info, request, gpu_gbs=448, ram_gbs=60)
    # A token reads 8 of 256 experts: tens of tokens/s, not the ~3 a dense 20 GB read would give.
    assert 10 < speed.tokens_per_second < 200 and speed.cpu_bytes < speed.gpu_bytes
    assert decode_speed(info, request, gpu_gbs=448, ram_gbs=None) is None
