"""`make run`'s supervisord, for real: the generated configuration with a real Redis and sampler.

A killed part is started again by supervisord while the others keep running, the
restart lands on the timeline (the event listener), and ``supervisorctl shutdown``
(`make stop`) stops everything.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from scripts.local_services import free_port, redis_server_binary
from scripts.supervisor_config import supervisorctl, supervisord, write_config
from tests.support.stack import ROOT, Service, wait_until


def program_pids(var_dir: Path) -> dict[str, int]:
    """``supervisorctl status`` as {name: pid} for the parts that are RUNNING."""
    out = subprocess.run(supervisorctl(var_dir, "status"), stdout=subprocess.PIPE, text=True, check=False).stdout
    pids = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == "RUNNING":
            pids[parts[0]] = int(parts[3].rstrip(","))
    return pids


def timeline_kinds(var_dir: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(var_dir / "db.sqlite3") as db:
        return db.execute("SELECT kind, details FROM monitor_event ORDER BY id").fetchall()


@pytest.fixture
def supervised(tmp_path):
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    port = free_port()
    env = dict(os.environ)
    env.update(
        QWENWEB_VAR_DIR=str(var_dir),
        REDIS_SERVER_BIN=redis_server_binary(),
        QWENWEB_REDIS_PORT=str(port),
        REDIS_URL=f"redis://127.0.0.1:{port}/0",
        QWENWEB_BIND="127.0.0.1",
        QWENWEB_PORT=str(free_port()),
    )
    (var_dir / "redis").mkdir()
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v", "0"], env=env, check=True, cwd=ROOT)
    write_config(env, with_redis=True, var_dir=var_dir, only={"redis", "sampler"})
    process = subprocess.Popen(
        supervisord(var_dir), env=env, cwd=ROOT, stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        wait_until(lambda: {"redis", "sampler"} <= set(program_pids(var_dir)), 30, "supervisord's programs", process)
        yield var_dir, process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def test_killed_part_is_restarted_recorded_and_make_stop_stops_all(supervised):
    var_dir, process = supervised
    before = program_pids(var_dir)
    os.kill(before["sampler"], signal.SIGKILL)

    wait_until(lambda: program_pids(var_dir).get("sampler", before["sampler"]) != before["sampler"], 30, "restart")
    after = program_pids(var_dir)
    assert after["redis"] == before["redis"]  # one crash never stops the others
    wait_until(
        lambda: [k for k, _ in timeline_kinds(var_dir)][-2:] == ["process_exited", "process_restarted"], 15, "events"
    )
    assert all('"sampler"' in details for _, details in timeline_kinds(var_dir))
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


def test_llama_supervisor_killed_alone_leaves_no_router_behind(llama):
    """supervisord SIGKILLs nothing but the program's own process when it dies (out of memory):
    the router it ran is orphaned, still holding the port; the restarted supervisor stops it."""
    orphan = llama.router_pid()
    os.kill(llama.process.pid, signal.SIGKILL)
    llama.process.wait(10)
    assert not _gone(orphan)
    Service.start(llama)  # the orphan still answers: wait for the new router, not for health alone
    wait_until(lambda: llama.router_pid() not in (None, orphan), 60, "a new router", llama.process, llama.log_path)
    assert _gone(orphan)
    wait_until(llama.healthy, 120, "the default profile answers again", llama.process, llama.log_path)
