"""The product under `make run`'s supervisord in a private folder, for tests and benchmarks.

The configuration is the one `make run` writes (scripts/supervisor_config.py), each start
recorded as under `make run` (scripts/leftovers.py), so that whatever a test leaves behind is
found and stopped even when supervisord is gone; the parts are found and killed as an operator would: ``supervisorctl status`` for each program's
pid, the llama-server supervisor's pid file for its router. Stored rows are read
straight from the run's SQLite file, so a test's own Django set-up is left alone.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from scripts.leftovers import processes_of_run, stop
from scripts.local_services import free_port, private_redis_url, redis_server_binary
from scripts.stack import launch
from scripts.supervisor_config import supervisorctl
from tests.support.stack import ROOT

# Every long-lived part, as the faults kill them: supervisord's programs, and "llama-server"
# for the router the llama supervisor (program "llama") runs and restarts itself.
PARTS = ["web", "worker", "beat", "sampler", "redis", "llama-server", "llama"]


def supervised_env(var_dir: Path, base: dict, *, fresh_ports: bool) -> dict:
    """The environment supervisord runs with: this folder, a Redis of its own (``fresh_ports``:
    new ports for Redis, llama-server and the web server, apart from any already running)."""
    env = dict(base)
    env["QWENWEB_VAR_DIR"] = str(var_dir)
    env.pop("DATABASE_URL", None)  # its own SQLite file in the folder: the checks read rows straight from it
    env.pop("QWENWEB_WATCHDOG_INTERVAL_S", None)  # `make run`'s watchdog (the session's llama has none)
    # Its Redis with the password of its own folder, as `make run` has it (scripts/stack.py).
    port = free_port() if fresh_ports else urlsplit(env["REDIS_URL"]).port
    env["REDIS_URL"] = private_redis_url(var_dir, port)
    if fresh_ports:
        env["LLAMA_SERVER_URL"] = f"http://127.0.0.1:{free_port()}"
        env["QWENWEB_PORT"] = str(free_port())
    env["QWENWEB_REDIS_PORT"] = str(port)
    env["REDIS_SERVER_BIN"] = redis_server_binary()
    env["QWENWEB_BIND"] = "127.0.0.1"
    (var_dir / "redis").mkdir(parents=True, exist_ok=True)
    return env


class Supervised:
    """supervisord and its programs, started from the generated configuration."""

    def __init__(self, var_dir: Path, env: dict):
        self.var_dir = var_dir
        self.env = env
        self.process: subprocess.Popen | None = None

    def manage(self, *args: str) -> str:
        """``manage.py ARGS`` against this run's database and settings; its output."""
        argv = [sys.executable, str(ROOT / "manage.py"), *args]
        return subprocess.run(argv, env=self.env, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout

    def start(self, only: set[str] | None = None) -> None:
        argv = launch(self.env, self.var_dir, with_redis=True, only=only)
        log = (self.var_dir / "supervisord.out").open("ab")
        self.process = subprocess.Popen(
            argv, env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()

    def shutdown(self) -> None:
        """`make stop`; every process of the run stopped without supervisord if that did not end it in time."""
        if self.process is not None and self.process.poll() is None:
            subprocess.run(supervisorctl(self.var_dir, "shutdown"), check=False, stdout=subprocess.DEVNULL)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                pass
        self.stop_everything()

    def stop_everything(self) -> None:
        """Every process of this run, supervisord's programs and their children alike (SIGTERM, then SIGKILL)."""
        stop(processes_of_run(self.var_dir), 5)
        if self.process is not None and self.process.poll() is None:
            self.process.wait(10)

    def pids(self) -> dict[str, int]:
        """``supervisorctl status`` as {program: pid} for the programs that are RUNNING."""
        return program_pids(self.var_dir)

    def router_pid(self) -> int:
        """The llama-server router's pid (0: none alive)."""
        try:
            pid = int((self.var_dir / "run" / "llama-router.pid").read_text().strip())
        except (FileNotFoundError, ValueError):
            return 0
        return pid if psutil.pid_exists(pid) else 0

    def pid_of(self, part: str) -> int:
        return self.router_pid() if part == "llama-server" else self.pids().get(part, 0)

    def kill(self, part: str) -> int:
        """SIGKILL one part (the fault); returns the pid killed."""
        pid = self.pid_of(part)
        assert pid, f"{part} is not running"
        os.kill(pid, signal.SIGKILL)
        return pid

    def timeline(self) -> list[tuple[str, str]]:
        return query(self.var_dir, "SELECT kind, details FROM monitor_event ORDER BY id")


def program_pids(var_dir: Path) -> dict[str, int]:
    out = subprocess.run(supervisorctl(var_dir, "status"), stdout=subprocess.PIPE, text=True, check=False).stdout
    pids = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == "RUNNING":
            pids[parts[0]] = int(parts[3].rstrip(","))
    return pids


def query(var_dir: Path, sql: str, params: tuple = ()) -> list[tuple]:
    with sqlite3.connect(var_dir / "db.sqlite3", timeout=30) as db:
        return db.execute(sql, params).fetchall()


def stored_messages(var_dir: Path) -> list[tuple[int, str, str, str, str]]:
    """Every stored message: (id, role, content, status, error), oldest first."""
    return query(var_dir, "SELECT id, role, content, status, error FROM chat_message ORDER BY id")
