"""A second inference node on this machine, started as a person starts one: `scripts/node.py` (what
`make node` runs) with the main box's address and a join token, in a var folder of its own, its
llama-server router on another loopback port. Its console (the script's output) is kept in a file.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from scripts.leftovers import processes_of_run, read_records, stop
from tests.support.client import base_url
from tests.support.stack import ROOT, free_port

# The main box's settings that the node must not inherit: it gets its own from the join.
MAIN_ONLY = ("REDIS_URL", "DATABASE_URL", "LLAMA_SERVER_URL", "LLAMA_API_KEY", "QWENWEB_PORT", "QWENWEB_NODE_NAME")
TOKEN_ON_PAGE = re.compile(r'id="shown-token-value">([^<]+)<')


def token_from_page(html: str) -> str:
    return TOKEN_ON_PAGE.search(html).group(1)


class NodeRun:
    """One `scripts/node.py` run: its var folder, its console, its process."""

    def __init__(self, folder: Path, name: str, model: Path, env: dict[str, str] | None = None):
        self.extra_env = env or {}
        self.var_dir = folder / "var"
        self.models = self.var_dir / "models"
        self.models.mkdir(parents=True, exist_ok=True)
        (self.models / model.name).unlink(missing_ok=True)
        (self.models / model.name).symlink_to(model.resolve())
        self.name = name
        self.console_path = folder / "console.log"
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def environment(self) -> dict:
        env = {key: value for key, value in os.environ.items() if key not in MAIN_ONLY}
        env.update(QWENWEB_VAR_DIR=str(self.var_dir), QWENWEB_MODELS_DIR=str(self.models), LANG="C.UTF-8")
        return {**env, **self.extra_env}

    def start(self, token: str = "") -> None:
        """The first start: `make node MAIN=... TOKEN=... NAME=... LLAMA_BIND=... LLAMA_PORT=...`; a later
        one (no token): `make node`, with what it saved."""
        env = self.environment()
        argv = [sys.executable, str(ROOT / "scripts" / "node.py")]
        if token:
            argv += ["--main", base_url(), "--token", token, "--name", self.name]
            argv += ["--llama-bind", "127.0.0.1", "--llama-port", str(self.port)]
        with self.console_path.open("ab") as console:
            self.process = subprocess.Popen(
                argv, env=env, cwd=ROOT, stdout=console, stderr=subprocess.STDOUT, start_new_session=True
            )

    def make_stop(self) -> subprocess.CompletedProcess:
        """`make stop` on the node's box."""
        argv = [sys.executable, str(ROOT / "scripts" / "stack.py"), "stop"]
        return subprocess.run(argv, env=self.environment(), cwd=ROOT, capture_output=True, text=True, timeout=120)

    def console(self) -> str:
        return self.console_path.read_text(errors="replace") if self.console_path.exists() else ""

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def program_group(self, name: str) -> int:
        """The process group of one of the node's programs ("worker", "llama"...): supervisord gives each
        a group of its own, led by the recorded process."""
        return next(
            record.pid for record in reversed(read_records(self.var_dir)) if record.name == name and record.is_alive()
        )

    def llama_supervisor_pid(self) -> int:
        return int((self.var_dir / "run" / "llama-supervisor.pid").read_text())

    def stop(self) -> None:
        """As Ctrl-C would: supervisord stops the node's programs; whatever is left is stopped from the records."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        stop(processes_of_run(self.var_dir), 5)
