"""A test's own server in its own process (the LDAP directory, the OIDC provider): a free loopback
port, and the faults the tests inject: ``stop``/``go`` SIGSTOP and SIGCONT it (it accepts
connections and answers nothing), ``kill`` ends it, ``close`` ends it and removes its folder."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerProcess:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def stop(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def go(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait()

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)
