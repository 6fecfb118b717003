"""The dashboard against real services: the sampler reading a real llama-server under load,
its faults (server killed, server hung), the self-test on the default model, the live
socket, request figures, the timeline's events and the Prometheus endpoint."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path

import httpx
import orjson
import pytest
import redis as redis_client
from django.conf import settings
from django.test import Client, override_settings
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from monitor.catalog import download_jobs, downloads
from monitor.models import Event, SelfTestResult
from monitor.nodes.registry import placement_here
from monitor.profiles.clients import profile_client
from monitor.profiles.selectors import find_profile
from monitor.telemetry import dashboard
from monitor.telemetry.live import WATCHED_KEY, live_key
from monitor.telemetry.node_status import CHECKED_KEY
from monitor.telemetry.sampler import Sampler
from monitor.telemetry.selftest import run_self_test
from scripts.local_services import free_port, redis_server_binary
from tests.support.client import base_url, dashboard_socket, login, make_user
from tests.support.file_server import FileServer
from tests.support.stack import ROOT, Service, wait_until

MODELS = Path(os.environ["QWENWEB_MODELS_DIR"])


async def _generate(client) -> None:
    """An answer long enough to be sampled at any speed (the test cancels it once it has seen it)."""
    payload = {
        "messages": [{"role": "user", "content": "Count slowly from one to one hundred."}],
        "max_tokens": 4000,
        "ignore_eos": True,
    }
    async for _batch in client.stream_chat(payload):
        pass


def test_sampler_reads_the_real_server_under_load_and_says_there_is_no_gpu(llama):
    client = profile_client(find_profile(), placement_here(find_profile()))

    async def main():
        sampler = Sampler(source_timeout_s=5)
        first = await sampler.sample()
        generating = asyncio.create_task(_generate(client))
        busy = []
        for _ in range(40):
            await asyncio.sleep(0.5)
            sample = await sampler.sample()
            server = sample["servers"][0]
            if server["ok"] and server["requests_processing"] >= 1 and (server["generation_tps"] or 0) > 0:
                busy.append(sample)
                if len(busy) >= 2:
                    break
        generating.cancel()  # the answer's connection closes: llama-server stops it
        await asyncio.gather(generating, return_exceptions=True)
        return first, busy

    first, busy = asyncio.run(main())
    # No NVIDIA GPU on this machine: said plainly, the rest still sampled.
    assert first["gpu"]["available"] is False and first["gpu"]["reason"]
    assert first["host"]["ram_total_bytes"] > 0
    assert first["servers"][0]["profile"] == "chat-8k"
    assert first["servers"][0]["ok"], first["servers"][0]
    assert busy, "never saw the server generating"
    server = busy[-1]["servers"][0]
    assert any(slot["processing"] and slot["used"] > 0 for slot in server["slots"])
    assert server["slots_busy"] >= 1 and server["slots_total"] == 2  # the node card's slots busy / free
    assert busy[-1]["node"] == settings.NODE_NAME
    assert server["kv_used_pct"] > 0
    assert busy[-1]["stale"] == []


def test_a_killed_server_is_marked_stale_and_the_rest_still_arrives(llama):
    async def main():
        sampler = Sampler(source_timeout_s=2)
        before = await sampler.sample()
        llama.kill()
        after = await sampler.sample()
        return before, after

    before, after = asyncio.run(main())
    assert before["servers"][0]["ok"]
    server = after["servers"][0]
    assert not server["ok"]
    assert server["error"] == "The model server is not reachable right now."
    assert after["stale"] == ["llama-server chat-8k: The model server is not reachable right now."]
    assert after["host"]["cpu_pct"] is not None


def test_a_hung_server_times_out_and_is_marked_stale(llama):
    async def main():
        sampler = Sampler(source_timeout_s=0.5)
        router = llama.router_pid()
        os.kill(router, signal.SIGSTOP)  # accepts connections, answers nothing
        try:
            # It answers though llama-server never will: a sampler that waited on it would be stopped here.
            return await asyncio.wait_for(sampler.sample(), 60)
        finally:
            os.kill(router, signal.SIGCONT)

    sample = asyncio.run(main())
    assert sample["servers"][0]["error"] == "timeout"
    assert sample["stale"] == ["llama-server chat-8k: timeout"]


def test_self_test_measures_the_default_model(llama):
    result = asyncio.run(run_self_test(None))
    assert result.ok, result.error
    assert result.profile == "chat-8k"
    assert result.models_listed
    assert result.prompt_tokens >= 100 and result.prompt_tps > 0
    assert result.generated_tokens == 32 and result.generation_tps > 0
    assert result.ttft_ms > 0
    assert "ctx 8192" in result.settings_summary
    event = Event.objects.filter(kind=Event.Kind.SELF_TEST, profile="chat-8k").first()
    assert "generation" in event.message and event.details["result"] == result.id


def test_self_test_with_the_server_down_records_why(llama):
    llama.kill()
    result = asyncio.run(run_self_test("chat-8k"))
    assert not result.ok
    assert result.error == "listing models failed: The model server is not reachable right now."
    event = Event.objects.filter(kind=Event.Kind.SELF_TEST, level=Event.Level.ERROR).first()
    assert "not reachable" in event.message


def test_request_figures_per_profile_from_recorded_answers():
    from chat.models import Conversation, Message

    Message.objects.all().delete()  # the figures cover every answer in the window: only this test's are there
    owner = make_user()
    tag = uuid.uuid4().hex[:6]
    from monitor.models import ServerProfile

    other = ServerProfile.objects.get(name="long-32k")
    plain = Conversation.objects.create(owner=owner, title=tag)
    long = Conversation.objects.create(owner=owner, title=tag, profile=other)
    for i in range(1, 21):
        Message.objects.create(
            conversation=plain,
            role=Message.Role.ASSISTANT,
            stats={"ttft_ms": i * 10.0, "tokens_per_second": float(i)},
        )
    Message.objects.create(
        conversation=long, role=Message.Role.ASSISTANT, stats={"ttft_ms": 500.0, "tokens_per_second": 3.0}
    )
    # An answer that failed counts nowhere.
    Message.objects.create(
        conversation=long, role=Message.Role.ASSISTANT, status=Message.Status.ERROR, stats={"ttft_ms": 1.0}
    )
    rows = {row["profile"]: row for row in dashboard.request_figures()}
    Message.objects.filter(conversation__title=tag).delete()
    assert set(rows) == {"chat-8k", "long-32k"}  # no profile: the default's
    assert rows["chat-8k"]["answers"] == 20 and rows["long-32k"]["answers"] == 1
    assert rows["chat-8k"]["ttft_p50_ms"] == 100.0
    assert rows["chat-8k"]["ttft_p95_ms"] == 190.0
    assert rows["chat-8k"]["generation_tps_p50"] == 10.0
    assert rows["long-32k"]["ttft_p50_ms"] == 500.0 and rows["long-32k"]["generation_tps_p50"] == 3.0


def test_download_end_is_on_the_timeline(tmp_path):
    (tmp_path / "timeline-model.gguf").symlink_to((MODELS / "gemma-3-270m-q4_k_m.gguf").resolve())
    mirror = FileServer(tmp_path)
    try:
        done = downloads.run_job(download_jobs.create_job(None, mirror.url("ok", "timeline-model.gguf")).id)
        failed = downloads.run_job(download_jobs.create_job(None, mirror.url("missing", "gone.gguf")).id)
    finally:
        mirror.close()
        (MODELS / "timeline-model.gguf").unlink(missing_ok=True)
    assert done.status == "done" and failed.status == "failed"
    finished = Event.objects.get(kind=Event.Kind.DOWNLOAD_FINISHED, details__job=done.id)
    assert finished.message == "Download of timeline-model.gguf finished."
    failure = Event.objects.get(kind=Event.Kind.DOWNLOAD_FAILED, details__job=failed.id)
    assert failure.level == Event.Level.ERROR and "404" in failure.message


def test_a_waiter_giving_up_is_a_queue_overflow_event(redis_server):
    from monitor.serving import queue as fair_queue
    from tests.integration.test_fair_queue import Places, Pool

    pool = Pool(os.environ["REDIS_URL"])
    pool.serve("a", 1)

    async def main():
        holder = await pool.acquire("A")
        places = Places()
        waiter = asyncio.create_task(pool.acquire("B", on_position=places))
        await places.told.wait()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await pool.queue.release(holder)
        await asyncio.gather(*fair_queue.recording)

    asyncio.run(main())
    events = Event.objects.filter(kind=Event.Kind.QUEUE_OVERFLOW)
    assert events.count() == 1
    assert events.first().message.startswith("A request gave up waiting in the queue at position 1")


def test_live_socket_pushes_new_samples_to_staff_only(web_server, sampler):
    admin = login(make_user(is_staff=True))
    with dashboard_socket(admin) as ws:
        history = json.loads(ws.recv(timeout=10))
        assert history["type"] == "history" and history["samples"]
        times = []
        while len(times) < 3:
            event = json.loads(ws.recv(timeout=10))
            if event["type"] == "sample":
                times.append(event["sample"]["t"])
                assert event["sample"]["gpu"]["available"] is False
        assert times == sorted(times) and len(set(times)) == 3
    person = login(make_user())
    with pytest.raises(InvalidStatus) as refused:
        dashboard_socket(person)
    assert refused.value.response.status_code == 403


def test_a_dashboard_that_opens_late_in_an_idle_wait_wakes_the_sampler_at_once(web_server, sampler):
    """The idle sampler waits a whole idle interval (10 s) for a dashboard; one that opens in the second
    half of that wait (past redis-py's default 5 s read timeout) still gets its figures at once."""
    client = redis_client.Redis.from_url(os.environ["REDIS_URL"])
    newest = lambda: orjson.loads(client.lindex(live_key(settings.NODE_NAME), 0))["t"]  # noqa: E731
    wait_until(lambda: not client.exists(WATCHED_KEY), 15, "no dashboard open")
    # Idle: the next sample comes an idle interval after the last one.
    first = newest()
    wait_until(lambda: newest() > first, 30, "an idle sample")
    idle_from = newest()
    # The main box's sampler checks the heartbeats half-way through its wait: then it is 5 s in.
    wait_until(lambda: float(client.get(CHECKED_KEY) or 0) >= idle_from + 4, 15, "half-way through the wait")
    assert newest() == idle_from  # still waiting
    with dashboard_socket(login(make_user(is_staff=True))) as ws:
        while (event := json.loads(ws.recv(timeout=15)))["type"] != "sample" or event["sample"]["t"] <= idle_from:
            pass
    # Taken by the sampler before its idle wait was over (its own clock): the dashboard woke it.
    assert event["sample"]["t"] < idle_from + settings.MONITOR_IDLE_SAMPLE_INTERVAL_S - 1, (idle_from, event)


def test_metrics_endpoint_for_staff_and_token_only(web_server, sampler, llama):
    from asgiref.sync import async_to_sync

    from monitor.profiles.loading import ensure_serving

    async_to_sync(ensure_serving)(find_profile(None))  # an earlier test may have loaded another profile
    admin = login(make_user(is_staff=True))
    deadline = time.monotonic() + 45  # the sampler looks for loaded profiles every 15 s
    while True:
        body = admin.get("/metrics")
        assert body.status_code == 200
        if 'qwenweb_llama_up{profile="chat-8k"} 1.0' in body.text or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert "qwenweb_host_cpu_pct" in body.text
    assert 'qwenweb_llama_up{profile="chat-8k"} 1.0' in body.text
    assert "qwenweb_gpu_available 0.0" in body.text
    assert "qwenweb_events_total" in body.text
    assert login(make_user()).get("/metrics").status_code == 403
    assert httpx.get(base_url() + "/metrics").status_code == 403
    # A scraper's bearer token (in-process client: the setting is read per request).
    client = Client(SERVER_NAME="127.0.0.1")  # a host the box answers to (ALLOWED_HOSTS is not "*")
    with override_settings(METRICS_TOKEN="scrape-token-123"):
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token-123").status_code == 200
        assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token-123").status_code == 403


def test_dashboard_pages_are_staff_only(web_server):
    person = login(make_user())
    for path in ("/monitor/", "/monitor/dashboard.json"):
        assert person.get(path).status_code == 403
        assert httpx.get(base_url() + path).status_code == 403
    token = person.cookies["csrftoken"]
    assert person.post("/monitor/selftest/", data={"csrfmiddlewaretoken": token}).status_code == 403
    admin = login(make_user(is_staff=True))
    page = admin.get("/monitor/")
    assert page.status_code == 200 and "No NVIDIA GPU is visible" in page.text
    history = admin.get("/monitor/dashboard.json?history=1").json()
    assert set(history) >= {"request_figures", "self_tests", "timeline", "history"}


def test_history_rows_are_pruned_after_the_window(celery_worker):
    from datetime import timedelta

    from django.utils import timezone

    from monitor.models import MetricMinute
    from monitor.tasks import prune_metric_history

    old = MetricMinute.objects.create(at=timezone.now() - timedelta(hours=72), values={"host.cpu_pct": 1})
    new = MetricMinute.objects.create(at=timezone.now() - timedelta(hours=23), values={"host.cpu_pct": 2})
    assert prune_metric_history.delay().get(timeout=60) >= 1
    assert not MetricMinute.objects.filter(id=old.id).exists()
    assert MetricMinute.objects.filter(id=new.id).exists()
    # Rows from before there were nodes are the main box's; a running sampler may add later minutes.
    assert 2 in dashboard.history(settings.NODE_NAME, 24)["series"]["host.cpu_pct"]
    assert SelfTestResult.objects.model is SelfTestResult


@pytest.fixture
def dashboard_on_own_redis(run_dir):
    """A web process and the sampler on a Redis of their own, which the test kills (the session's
    Redis serves the other tests). Yields the web's URL and that Redis."""
    redis_port, web_port = free_port(), free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = {**os.environ, "REDIS_URL": redis_url, "QWENWEB_PORT": str(web_port), "QWENWEB_SWEEP_ON_START": "0"}
    (run_dir / "redis-restarted").mkdir(exist_ok=True)
    redis_argv = [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(redis_port), "--save", ""]
    services = [
        Service("redis-restarted", [*redis_argv, "--dir", str(run_dir / "redis-restarted")], run_dir, env),
        Service(
            "daphne-own-redis",
            [sys.executable, "-m", "qwenweb.serve", "--bind", "127.0.0.1", "--port", str(web_port)],
            run_dir,
            env,
        ),
        Service("sampler-own-redis", [sys.executable, str(ROOT / "manage.py"), "run_sampler"], run_dir, env),
    ]
    redis, web, sampler = services
    client = redis_client.Redis.from_url(redis_url)
    try:
        redis.start()
        wait_until(client.ping, 20, "redis", redis.process, redis.log_path)
        web.start()
        web_url = f"http://127.0.0.1:{web_port}"
        wait_until(lambda: httpx.get(f"{web_url}/login/").status_code == 200, 60, "daphne", web.process, web.log_path)
        sampler.start()
        wait_until(
            lambda: client.llen(live_key(settings.NODE_NAME)) > 0, 60, "sampler", sampler.process, sampler.log_path
        )
        yield web_url, redis
    finally:
        for service in reversed(services):
            service.stop()


def _next_event(ws, kind: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        event = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
        if event["type"] == kind:
            return event


def test_the_live_socket_outlives_a_redis_restart(dashboard_on_own_redis):
    web_url, redis = dashboard_on_own_redis
    staff = Client()
    staff.force_login(make_user(is_staff=True))
    cookie = f"{settings.SESSION_COOKIE_NAME}={staff.cookies[settings.SESSION_COOKIE_NAME].value}"
    with connect(
        web_url.replace("http", "ws") + "/ws/monitor/", origin=web_url, additional_headers={"Cookie": cookie}
    ) as ws:
        assert _next_event(ws, "history")
        before = _next_event(ws, "sample")["sample"]["t"]
        redis.kill()  # SIGKILL: the server is gone, its data with it (no save)
        assert _next_event(ws, "stale")["reason"] == "redis"  # the page is told, on the same socket
        redis.start()
        # The sampler finds Redis again (its idle wait: at most MONITOR_IDLE_SAMPLE_INTERVAL_S), the socket's
        # loop too (it marks the dashboard watched and wakes the sampler), and new samples come on the same socket.
        after = _next_event(ws, "sample", timeout=60)["sample"]["t"]
        assert after > before
