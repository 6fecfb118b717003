"""`make run`'s supervisord, for real: the generated configuration with a real Redis and sampler.

A killed part is started again by supervisord while the others keep running, the
restart lands on the timeline (the event listener), and ``supervisorctl shutdown``
(`make stop`) stops everything. A killed supervisord leaves its programs running: the next
`make run` stops them and starts clean, and `make stop` stops them without supervisord.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
import redis
from celery import Celery

from monitor.models import Event
from scripts.leftovers import alive, describe, processes_of_run, stop
from scripts.supervisor_config import supervisorctl
from tests.support.stack import ROOT, Service, wait_until
from tests.support.supervised import Supervised, program_pids, supervised_env


@pytest.fixture
def supervised(tmp_path):
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    stack = Supervised(var_dir, supervised_env(var_dir, os.environ, fresh_ports=True))
    stack.manage("migrate", "-v", "0")
    stack.start(only={"redis", "sampler"})
    try:
        wait_until(lambda: {"redis", "sampler"} <= set(stack.pids()), 30, "supervisord's programs", stack.process)
        yield stack
    finally:
        stack.stop_everything()


def test_killed_part_is_restarted_recorded_and_make_stop_stops_all(supervised):
    var_dir, process = supervised.var_dir, supervised.process
    before = supervised.pids()
    os.kill(before["sampler"], signal.SIGKILL)

    wait_until(lambda: supervised.pids().get("sampler", before["sampler"]) != before["sampler"], 30, "restart")
    after = supervised.pids()
    assert after["redis"] == before["redis"]  # one crash never stops the others
    wait_until(
        lambda: [k for k, _ in supervised.timeline()][-2:] == ["process_exited", "process_restarted"], 15, "events"
    )
    assert all('"sampler"' in details for _, details in supervised.timeline())
    assert "Ready to accept connections" in (var_dir / "log" / "redis.log").read_text()
    assert oct((var_dir / "run" / "supervisor.sock").stat().st_mode & 0o777) == "0o700"

    subprocess.run(supervisorctl(var_dir, "shutdown"), check=True, stdout=subprocess.DEVNULL)
    process.wait(30)
    time.sleep(0.2)
    assert not any(psutil.pid_exists(pid) for pid in after.values())


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _kill_supervisor(llama) -> int:
    """SIGKILL the llama-server supervisor alone (what the out-of-memory killer does); its router's pid."""
    router = llama.router_pid()
    os.kill(llama.process.pid, signal.SIGKILL)
    llama.process.wait(10)
    assert not _gone(router)
    return router


STARTS = (Event.Kind.SERVER_STARTED, Event.Kind.SERVER_RESTARTED)


def _last_event_id() -> int:
    last = Event.objects.order_by("-id").first()
    return last.id if last else 0


def _supervisor_started_again(llama, since: int) -> Event:
    """A new supervisor, up to the point where it has decided about the router: its start, or its
    keeping, on the timeline after event ``since`` (that event)."""
    Service.start(llama)

    def decided() -> Event | None:
        return Event.objects.filter(kind__in=STARTS, id__gt=since, details__pid=llama.router_pid()).first()

    wait_until(decided, 60, "the new supervisor's decision", llama.process, llama.log_path)
    return decided()


def test_a_killed_llama_supervisor_keeps_its_router_and_the_answer_it_streams(llama):
    """supervisord SIGKILLs nothing but the program's own process when it dies (out of memory): the router
    it ran lives on, with its model and the answer streaming from it. The supervisor started in its place
    keeps that router (no restart, no load: the answer goes on), watches it, and stops it on a restart."""
    body = {"model": llama.model_id, "messages": [{"role": "user", "content": "Count."}], "stream": True}
    body |= {"max_tokens": 200, "ignore_eos": True}
    chunks: list[str] = []
    with httpx.Client(base_url=llama.url, headers=llama.headers, timeout=120) as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            lines = response.iter_lines()
            chunks.append(next(line for line in lines if line.startswith("data: ")))  # it streams
            since = _last_event_id()
            router = _kill_supervisor(llama)
            decision = _supervisor_started_again(llama, since)
            assert llama.router_pid() == router  # kept, not started again
            chunks += [line for line in lines if line.startswith("data: ")]
    assert chunks[-1] == "data: [DONE]"  # the answer streamed to its end through the supervisor's death
    assert decision.kind == Event.Kind.SERVER_STARTED and "kept running" in decision.message
    assert llama.healthy()

    from monitor.router.supervisor import request_restart

    assert request_restart("a test")  # the kept router is this supervisor's to stop and start again
    wait_until(lambda: llama.router_pid() not in (None, router), 60, "a new router", llama.process, llama.log_path)
    wait_until(lambda: _gone(router), 30, "the kept router stopped")
    wait_until(llama.healthy, 120, "the default profile answers again", llama.process, llama.log_path)


def test_a_killed_llama_supervisor_stops_a_router_it_would_not_start(llama):
    """A router started with other settings (here: another instance limit) is not kept: the new supervisor
    stops it (it holds the port) and starts its own; then the same again back to the usual settings."""
    for models_max in ("3", os.environ.get("QWENWEB_MODELS_MAX")):
        since = _last_event_id()
        router = _kill_supervisor(llama)
        if models_max is None:
            llama.env.pop("QWENWEB_MODELS_MAX", None)
        else:
            llama.env["QWENWEB_MODELS_MAX"] = models_max
        _supervisor_started_again(llama, since)
        assert _gone(router)
        assert llama.router_pid() != router
        wait_until(llama.healthy, 120, "the default profile answers again", llama.process, llama.log_path)


STACK = [sys.executable, str(ROOT / "scripts" / "stack.py")]
PROGRAMS = {"redis", "llama", "web", "worker", "documents", "beat", "sampler"}
WORKERS = {"celery", "documents"}


def every_part_answers(var_dir: Path, env: dict) -> bool:
    """Each program RUNNING under supervisord, and each part answering on its own port or queue."""
    assert PROGRAMS <= set(program_pids(var_dir))
    assert httpx.get(f"http://127.0.0.1:{env['QWENWEB_PORT']}/login/", timeout=5).status_code == 200
    assert redis.Redis.from_url(env["REDIS_URL"], socket_timeout=5).ping()
    key = env.get("LLAMA_API_KEY") or (var_dir / "llama_api_key").read_text().strip()
    served = httpx.get(env["LLAMA_SERVER_URL"] + "/models", headers={"Authorization": f"Bearer {key}"}, timeout=5)
    # A profile's instance loaded: the router alone would answer too.
    assert any(model["status"]["value"] == "loaded" for model in served.json()["data"])
    answered = Celery(broker=env["REDIS_URL"]).control.ping(timeout=3)
    return {name.split("@")[0] for reply in answered for name in reply} >= WORKERS


def test_make_run_after_a_killed_supervisord_stops_the_old_run_and_starts_clean(tmp_path):
    """supervisord SIGKILLed leaves every program running (each in a group of its own) and holding its
    port; `make run` again stops all of it, saying what, and every part comes up; `make stop` with
    supervisord killed again stops every part of the new run."""
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    env = supervised_env(var_dir, os.environ, fresh_ports=True)
    log_path = tmp_path / "make-run.log"
    runs = []

    def make_run() -> subprocess.Popen:
        with log_path.open("ab") as log:
            runs.append(subprocess.Popen([*STACK, "run"], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
        wait_until(lambda: every_part_answers(var_dir, env), 300, "every part", runs[-1], log_path)
        return runs[-1]

    try:
        first = make_run()
        old = processes_of_run(var_dir)
        assert {leftover.part for leftover in old} >= {"supervisord", "events", *PROGRAMS}
        llama_servers = [left for left in old if left.part == "llama" and left.process.name() == "llama-server"]
        assert len(llama_servers) >= 2, describe(old)  # the router and the default profile's instance

        first.kill()
        first.wait(10)
        time.sleep(1)
        # The trap: without supervisord every program still runs and holds its port.
        assert [
            left.part for left in old if left.part not in ("supervisord", "events") and not alive(left.process)
        ] == []
        assert httpx.get(f"http://127.0.0.1:{env['QWENWEB_PORT']}/login/", timeout=5).status_code == 200

        supervisord_log = var_dir / "log" / "supervisord.log"
        first_run_log = len(supervisord_log.read_text())
        said = len(log_path.read_text())
        second = make_run()
        output = log_path.read_text()[said:]
        assert "stopping what the last run left running" in output, output
        for part in ("web:", "redis:", "llama:", "worker:", "sampler:"):
            assert part in output, output
        assert [left.part for left in old if alive(left.process)] == []
        # Started clean: no part of the new run exited (a web server that found its port taken would).
        exits = [line for line in supervisord_log.read_text()[first_run_log:].splitlines() if "exited:" in line]
        assert [line for line in exits if "exited: ready" not in line] == []

        new = processes_of_run(var_dir)
        second.kill()
        second.wait(10)
        stopped = subprocess.run([*STACK, "stop"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert "supervisord is gone" in stopped.stdout and "web:" in stopped.stdout, stopped.stdout
        assert [left.part for left in new if alive(left.process)] == []
        assert processes_of_run(var_dir) == []
    finally:
        stop(processes_of_run(var_dir), 5)
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.wait(10)
