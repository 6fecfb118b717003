"""Health against the real stack: /healthz, the staff view of every part, parts killed for
real (the sampler, the worker) shown as down, a stopped (SIGSTOP) web server caught by
``manage.py health`` from outside it, and a second node going down."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest
from django.conf import settings

from monitor.models import Node, Placement, ServerProfile
from monitor.redis_clients import sync_client
from monitor.telemetry.health import BEAT_KEY
from scripts.supervisor_config import programs
from tests.support.client import base_url, login, make_user
from tests.support.node_box import NodeBox
from tests.support.stack import ROOT, Service, wait_until


def _program_argv(name: str) -> list[str]:
    """The part's argv exactly as `make run`'s supervisord starts it."""
    env = {"QWENWEB_VAR_DIR": os.environ["QWENWEB_VAR_DIR"], "QWENWEB_BIND": "127.0.0.1", "QWENWEB_PORT": "0"}
    return next(p.argv for p in programs(env, with_redis=False) if p.name == name)


@pytest.fixture(scope="module")
def beat(run_dir, redis_server):
    """Beat as `make run` starts it (the session fixtures do not), for this module only; no stamp of an
    earlier beat left: what the checks read is this one's scheduler's."""
    sync_client().delete(BEAT_KEY)
    service = Service("beat", _program_argv("beat"), run_dir)
    service.start()
    yield service
    service.stop()


def parts(client, timeout: float | None = None) -> dict[str, bool]:
    response = client.get("/monitor/health.json", **({"timeout": timeout} if timeout else {}))
    return {part["name"]: part["ok"] for part in response.json()["parts"]}


def manage_health(timeout: float = 30) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(ROOT / "manage.py"), "health", "--timeout", "2"]
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


@pytest.fixture
def everything(web_server, celery_worker, sampler, llama, beat):
    wait_until(lambda: httpx.get(base_url() + "/healthz", timeout=5).status_code == 200, 40, "every part healthy")


def test_healthz_and_the_staff_view_of_every_part(everything):
    answer = httpx.get(base_url() + "/healthz", timeout=5)
    assert (answer.status_code, answer.text, answer.headers["content-type"]) == (
        200,
        "ok\n",
        "text/plain; charset=utf-8",
    )
    assert httpx.get(base_url() + "/monitor/health.json").status_code == 403
    assert login(make_user()).get("/monitor/health/").status_code == 403
    admin = login(make_user(is_staff=True))
    names = {
        "database",
        "redis",
        "worker",
        "documents worker",
        "beat",
        "sampler",
        "llama-server",
        "profiles",
        f"node {settings.NODE_NAME}",
    }
    assert parts(admin) == dict.fromkeys(names, True)
    page = admin.get("/monitor/health/")
    assert page.status_code == 200 and "Every part answers." in page.text
    result = manage_health()
    assert result.returncode == 0, result.stdout
    assert "DOWN" not in result.stdout


def test_killed_sampler_and_worker_show_as_down(everything, sampler, celery_worker):
    admin = login(make_user(is_staff=True))
    sampler.kill()
    celery_worker.kill()
    try:
        # With no dashboard open it samples every idle interval: down after three of them go by.
        within = settings.MONITOR_IDLE_SAMPLE_INTERVAL_S * 3 + 3
        wait_until(lambda: not parts(admin)["sampler"], within + 5, "sampler shown down")
        state = parts(admin)
        assert state["worker"] is False and state["beat"] is True and state["redis"] is True
        page = admin.get("/monitor/health/")
        assert "Some parts are down" in page.text
        assert httpx.get(base_url() + "/healthz", timeout=5).text == "not ok\n"
        result = manage_health()
        assert result.returncode == 1
        assert "DOWN sampler" in result.stdout and "DOWN worker" in result.stdout
    finally:
        sampler.start()
        celery_worker.start()
        from qwenweb.celery import app

        wait_until(lambda: bool(app.control.ping(timeout=0.5)), 60, "celery worker")
    wait_until(lambda: all(parts(admin).values()), 20, "parts back up")


def test_a_stopped_beat_is_shown_late_once_its_stamp_is_older_than_it_allows(everything, beat):
    """Beat stamps its heartbeat from its own scheduler, whatever the workers do: frozen, it stamps no
    more (the stamp is set back here rather than waited for: 2.5 times BEAT_STAMP_S)."""
    admin = login(make_user(is_staff=True))
    os.kill(beat.process.pid, signal.SIGSTOP)
    try:
        sync_client().set(BEAT_KEY, str(time.time() - settings.BEAT_STAMP_S * 2.5 - 5))
        state = {part["name"]: part for part in admin.get("/monitor/health.json").json()["parts"]}
        assert state["beat"]["ok"] is False and re.fullmatch(r"last (8\d) s ago", state["beat"]["detail"]), state[
            "beat"
        ]
        result = manage_health()
        assert result.returncode == 1 and "DOWN beat" in result.stdout, result.stdout
    finally:
        os.kill(beat.process.pid, signal.SIGCONT)
        sync_client().set(BEAT_KEY, str(time.time()))  # the stamp the test set back, as beat would write it
    assert parts(admin)["beat"] is True


def test_stopped_web_server_is_caught_from_outside(everything, web_server):
    os.kill(web_server.process.pid, signal.SIGSTOP)
    try:
        result = manage_health(timeout=20)  # each check bounded (2 s): a hang would end in TimeoutExpired
    finally:
        os.kill(web_server.process.pid, signal.SIGCONT)
    assert result.returncode == 1, result.stdout
    assert "DOWN web" in result.stdout
    assert "up   database" in result.stdout


def test_a_hung_router_is_down_and_the_page_still_answers_quickly(everything, llama):
    admin = login(make_user(is_staff=True))
    router = llama.router_pid()
    os.kill(router, signal.SIGSTOP)
    try:
        # Every check at once, each bounded: a hung part does not hold the page (a hang ends in a timeout).
        state = parts(admin, timeout=20)
    finally:
        os.kill(router, signal.SIGCONT)
    assert state["llama-server"] is False and state["database"] is True


def test_a_second_node_down_leaves_healthz_ok_only_while_what_people_use_is_served_elsewhere(everything, run_dir):
    """A second box on this machine (tests/support/node_box.py: its own supervisor, heartbeat and sampler),
    frozen (SIGSTOP). A profile placed only there is lost with it: not ok; placed on the main box too: ok,
    degraded."""
    box = NodeBox(run_dir, "node-health-b")
    profile = ServerProfile.objects.create(name="node-health-b-only", model_file="gemma-3-270m-q4_k_m.gguf")
    admin = login(make_user(is_staff=True))
    try:
        box.start()
        Placement.objects.create(profile=profile, node=Node.objects.get(name=box.name))
        report = admin.get("/monitor/health.json").json()
        state = {part["name"]: part for part in report["parts"]}
        assert report["ok"] and not report["degraded"], report
        assert state["node node-health-b"]["ok"] and not state["node node-health-b"]["required"]
        assert state["node node-health-b"]["detail"].startswith("last heartbeat ")
        assert "serving: nothing loaded" in state["node node-health-b"]["detail"]  # placed, not loaded
        assert state[f"node {settings.NODE_NAME}"]["ok"]  # the main box's own, from its heartbeat
        assert "chat-8k on " + settings.NODE_NAME in state["profiles"]["detail"] and state["profiles"]["required"]

        box.freeze()
        wait_until(lambda: not parts(admin)["node node-health-b"], 15, "the second box shown down")
        report = admin.get("/monitor/health.json").json()
        state = {part["name"]: part for part in report["parts"]}
        assert not report["ok"] and "heartbeat" in state["node node-health-b"]["detail"]
        assert state["profiles"]["detail"].endswith("no node that answers can serve node-health-b-only")
        wait_until(lambda: httpx.get(base_url() + "/healthz", timeout=5).status_code == 503, 5, "/healthz not ok")
        result = manage_health()
        assert result.returncode == 1, result.stdout
        assert "DOWN profiles" in result.stdout and "DOWN node node-health-b" in result.stdout

        # The main box may serve it too (it answers; it would load the profile on demand): ok, degraded.
        Placement.objects.create(profile=profile, node=Node.objects.get(is_local=True))
        wait_until(lambda: httpx.get(base_url() + "/healthz", timeout=5).status_code == 200, 5, "/healthz ok")
        report = admin.get("/monitor/health.json").json()
        assert report["ok"] and report["degraded"]
        page = admin.get("/monitor/health/")
        assert "People are served, but some nodes are down" in page.text
        result = manage_health()
        assert result.returncode == 0, result.stdout
        assert "DOWN node node-health-b" in result.stdout and "degraded: node node-health-b" in result.stdout
    finally:
        box.stop()
        profile.delete()
