"""`make run`'s supervisord, for real: the generated configuration with a real Redis and sampler.

A killed part is started again by supervisord while the others keep running, the
restart lands on the timeline (the event listener), and ``supervisorctl shutdown``
(`make stop`) stops everything.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil
import pytest

from scripts.supervisor_config import supervisorctl
from tests.support.stack import Service, wait_until
from tests.support.supervised import Supervised, supervised_env


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
        if stack.process.poll() is None:
            os.killpg(stack.process.pid, signal.SIGKILL)
            stack.process.wait(10)


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
