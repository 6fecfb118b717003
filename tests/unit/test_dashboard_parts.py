"""Dashboard pieces that need no service: NVML on this GPU-less machine, series, percentiles, the token check."""

from django.test import override_settings

from monitor.telemetry.dashboard import percentile
from monitor.telemetry.figures import MinuteAverager, flatten, slot_figures
from monitor.telemetry.gpu import NvmlSampler, throttle_names
from monitor.telemetry.prometheus import token_allows


def test_nvml_sampler_reports_no_gpu_here_and_never_raises():
    sampler = NvmlSampler(retry_s=0)
    for now in (0.0, 1.0, 2.0):
        gpus, reason = sampler.sample(now)
        assert gpus == []
        assert reason  # why: no library, no driver
    sampler.close()


def test_nvml_sampler_waits_before_trying_again():
    sampler = NvmlSampler(retry_s=30)
    _gpus, reason = sampler.sample(100.0)
    sampler.reason = "remembered"
    assert sampler.sample(110.0) == ([], "remembered")  # not retried within 30 s
    assert sampler.sample(131.0)[1] == reason


def test_throttle_reasons_are_named():
    assert throttle_names(0) == []
    assert throttle_names(0x1 | 0x40) == ["gpu_idle", "hw_thermal_slowdown"]


def test_minute_averager_closes_each_minute_with_means():
    averager = MinuteAverager()
    assert averager.add(120.0, {"a": 1.0}) is None
    assert averager.add(150.0, {"a": 3.0, "b": 10.0}) is None
    minute, means = averager.add(181.0, {"a": 100.0})
    assert minute == 120
    assert means == {"a": 2.0, "b": 10.0}


def test_flatten_skips_servers_that_did_not_answer():
    sample = {
        "host": {"cpu_pct": 5.0, "ram_used_bytes": 10},
        "gpu": {"gpus": [{"index": 0, "used_bytes": 7, "total_bytes": 9, "utilization_pct": None}]},
        "servers": [
            {"profile": "a", "ok": True, "generation_tps": 12.5, "kv_used_pct": None},
            {"profile": "b", "ok": False, "generation_tps": 99},
        ],
    }
    assert flatten(sample) == {
        "host.cpu_pct": 5.0,
        "host.ram_used_bytes": 10,
        "gpu0.used_bytes": 7,
        "gpu0.total_bytes": 9,
        "llama.a.generation_tps": 12.5,
    }


def test_slot_figures_count_prompt_and_generated_tokens():
    slots = [
        {"id": 0, "n_ctx": 100, "is_processing": True, "n_prompt_tokens": 30, "next_token": [{"n_decoded": 5}]},
        {"id": 1, "n_ctx": 100, "is_processing": False},
    ]
    assert slot_figures(slots) == [
        {"id": 0, "n_ctx": 100, "used": 35, "decoded": 5, "processing": True},
        {"id": 1, "n_ctx": 100, "used": 0, "decoded": 0, "processing": False},
    ]


def test_percentile_nearest_rank():
    assert percentile([], 50) is None
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 95) == 95
    assert percentile([7.0], 95) == 7.0


def test_metrics_token_must_match_exactly():
    with override_settings(METRICS_TOKEN=""):
        assert not token_allows("Bearer ")
    with override_settings(METRICS_TOKEN="s3cret"):
        assert token_allows("Bearer s3cret")
        assert not token_allows("Bearer s3cre")
        assert not token_allows("s3cret")


def test_generation_rate_counts_busy_slots_and_finished_requests():
    from monitor.telemetry.sampler import Sampler

    sampler = Sampler()
    busy = [{"decoded": 10, "processing": True}]
    assert sampler._rates("p", 100.0, {"generated_tokens_total": 50}, busy)["generation_tps"] is None
    # 1 s later the slot decoded 8 more: 8 tok/s although the counter has not moved.
    assert sampler._rates("p", 101.0, {"generated_tokens_total": 50}, [{"decoded": 18, "processing": True}]) == {
        "prompt_tps": None,
        "generation_tps": 8.0,
    }
    # The request ended with 20 tokens: the counter adds 20, of which 18 were already counted.
    assert (
        sampler._rates("p", 102.0, {"generated_tokens_total": 70}, [{"decoded": 0, "processing": False}])[
            "generation_tps"
        ]
        == 2.0
    )
    # A restarted server: its counters start again from zero.
    assert sampler._rates("p", 103.0, {"generated_tokens_total": 5}, [])["generation_tps"] == 5.0


def test_llama_metrics_text_keeps_the_figures_we_chart():
    from monitor.telemetry.figures import parse_llama_metrics

    text = (
        "# HELP llamacpp:requests_processing Number of requests processing\n"
        "# TYPE llamacpp:requests_processing gauge\n"
        "llamacpp:requests_processing 2\n"
        "llamacpp:tokens_predicted_total 1234\n"
        "llamacpp:n_decode_total 99\n"
        "llamacpp:requests_deferred not-a-number\n"
    )
    assert parse_llama_metrics(text) == {"requests_processing": 2.0, "generated_tokens_total": 1234.0}


def test_a_dashboard_closed_while_its_redis_call_runs_stops_pushing(monkeypatch):
    """The page goes away while the push loop waits on Redis, and the call ends in a connection error
    rather than the cancellation (redis-py can turn one into the other when its connection is closed
    under it; the real server cannot be made to do that on cue, so a stand-in client does, named here
    as such). The loop rides out Redis outages: it must still end, or it pushes on for no page and
    keeps every node's sampler at a sample a second (the dashboard test saw the watched key outlive
    every page)."""
    import asyncio

    import redis

    from monitor.web import consumers

    class CutRedis:
        """Stand-in: a pipeline whose call waits, and whose cancellation surfaces as ConnectionError."""

        def __init__(self):
            self.calls = 0
            self.closed = False
            self.disguise = True  # a cancellation comes out as ConnectionError

        async def lrange(self, *args):
            return []

        def pipeline(self, **kwargs):
            client = self

            class Pipe:
                def __getattr__(self, name):
                    return lambda *args, **kwargs: self

                async def execute(self):
                    client.calls += 1
                    try:
                        await asyncio.sleep(3600)
                    except asyncio.CancelledError:
                        if not client.disguise:
                            raise
                        raise redis.ConnectionError("Connection closed by server.") from None

            return Pipe()

        async def aclose(self):
            self.closed = True

    monkeypatch.setattr(consumers, "main_node", lambda: "main")
    monkeypatch.setattr(consumers, "node_rows", lambda: [{"name": "main", "is_local": True}])
    sent = []

    async def run():
        consumer = consumers.DashboardConsumer()
        consumer.redis = CutRedis()

        async def send_json(content, close=False):
            sent.append(content["type"])

        consumer.send_json = send_json
        consumer.pusher = asyncio.create_task(consumer._push())
        while consumer.redis.calls == 0:
            await asyncio.sleep(0.01)
        await consumer.disconnect(1000)
        await asyncio.wait([consumer.pusher], timeout=3)  # more than a push interval
        ended = consumer.pusher.done()
        if not ended:  # stop the loop that went on (no disguise now), so that the test fails rather than hangs
            consumer.redis.disguise = False
            consumer.pusher.cancel()
            await asyncio.wait([consumer.pusher])
        assert ended, "the push loop went on after the page closed"
        assert consumer.redis.closed and consumer.redis.calls == 1
        assert "stale" not in sent  # nothing pushed to the page that left

    asyncio.run(run())
