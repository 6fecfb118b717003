"""A second inference box on this machine, for the pool's tests and benches.

It runs what a joined node runs, as real processes: the product's llama-server supervisor
(``manage.py run_llama_server``: the router on a loopback port of its own, its heartbeat) and a
Celery worker that takes only its own queue, with its own node name, var folder and API key,
against the main box's Redis and database (a joined node is given both).
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
from pathlib import Path

import httpx

from tests.support.stack import ROOT, LlamaServer, Service, _worker, free_port, wait_until


class SecondNode:
    def __init__(self, run_dir: Path, name: str):
        from django.conf import settings

        self.name = name
        self.var = run_dir / name
        (self.var / "models").mkdir(parents=True, exist_ok=True)
        model = Path(settings.MODELS_DIR) / settings.DEFAULT_MODEL_FILE
        link = self.var / "models" / model.name
        if not link.exists():
            link.symlink_to(model.resolve())
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.key = "sk-node-" + secrets.token_urlsafe(24)
        env = dict(os.environ)
        env.update(
            QWENWEB_NODE_NAME=name,
            QWENWEB_VAR_DIR=str(self.var),
            QWENWEB_MODELS_DIR=str(self.var / "models"),
            LLAMA_SERVER_URL=self.url,
            LLAMA_API_KEY=self.key,
            DATABASE_URL=os.environ.get("DATABASE_URL") or f"sqlite:///{settings.SQLITE_PATH}",
            DJANGO_SECRET_KEY=settings.SECRET_KEY,
        )
        self.env = env
        self.supervisor = Service(
            f"llama-{name}", [sys.executable, str(ROOT / "manage.py"), "run_llama_server"], run_dir, env
        )
        self.worker = _worker(run_dir, f"celery-{name}", "--queues", f"node.{name}", "--hostname", f"node@{name}")
        self.worker.env = env

    def register(self) -> None:
        from monitor.models import Node

        Node.objects.update_or_create(name=self.name, defaults={"url": self.url, "api_key": self.key})

    def start(self) -> None:
        self.supervisor.start()
        wait_until(self.router_answers, 120, f"{self.name}'s router", self.supervisor.process, self.supervisor.log_path)
        self.worker.start()

    def router_answers(self) -> bool:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.get(self.url + "/models", headers=headers, timeout=2).status_code == 200

    def router_pid(self) -> int | None:
        from monitor.router.supervisor import read_pid

        return read_pid(self.var / "run" / "llama-router.pid")

    def kill_router(self) -> None:
        """SIGKILL its llama-server router (its supervisor starts a new one, as on a real box)."""
        os.kill(self.router_pid(), signal.SIGKILL)

    def stop(self) -> None:
        self.worker.stop()
        self.supervisor.stop()

    @property
    def running(self) -> bool:
        return self.supervisor.running


__all__ = ["LlamaServer", "SecondNode"]
