"""Real services for tests and benchmarks: Redis, llama-server, Daphne, a Celery worker.

Each runs as a child process on a free loopback port, with its log in the run's
folder; the environment is set before Django is imported, so the app under test
and the processes it talks to agree on every address.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from monitor.llama.binary import without_amx_repack  # noqa: E402
from scripts.local_services import (  # noqa: E402
    ensure_default_model,
    free_port,
    private_redis_url,
    redis_server_argv,
    redis_server_binary,
    write_redis_acl,
)


def configure_environment(run_dir: Path, *, parallel: int = 2) -> dict:
    """Point settings at this run's folder and ports; returns the environment for children."""
    env = os.environ
    env["QWENWEB_VAR_DIR"] = str(run_dir)
    # The assembled default model is kept in the project's var/models and linked into
    # this run's own models directory, which downloads in the tests write to.
    models_dir = run_dir / "models"
    models_dir.mkdir(exist_ok=True)
    env["QWENWEB_MODELS_DIR"] = str(models_dir)
    env["QWENWEB_DOWNLOAD_ATTEMPTS"] = "2"
    env["QWENWEB_DOWNLOAD_READ_TIMEOUT_S"] = "3"
    # Document summaries: short partial summaries and small chunks keep the tests' model calls brief.
    env.setdefault("QWENWEB_DOCUMENT_SUMMARY_TOKENS", "48")
    env.setdefault("QWENWEB_DOCUMENT_CHUNK_TOKENS", "400")
    # An answer cut by a node killed on purpose waits this long for the node to come back (a router
    # restarted and its pool loaded again take a minute or two on a loaded 2-core box).
    env.setdefault("QWENWEB_RESUME_WAIT_S", "150")
    # As under `make run`: the default user's password (the run's redis_password) in REDIS_URL.
    env["REDIS_URL"] = private_redis_url(run_dir, free_port())
    env["LLAMA_SERVER_URL"] = f"http://127.0.0.1:{free_port()}"
    env["QWENWEB_PARALLEL"] = str(parallel)
    env["QWENWEB_PORT"] = str(free_port())
    env["DJANGO_SETTINGS_MODULE"] = "qwenweb.settings"
    env["PYTHONUNBUFFERED"] = "1"
    # No watchdog in the session's llama-server supervisor: tests that kill an instance on purpose see
    # what they cause, not a reload of their own; the tests that need it turn it on (`make run`'s stacks,
    # node-b, tests/integration/test_profile_serving.py).
    env["QWENWEB_WATCHDOG_INTERVAL_S"] = "0"
    # llama-server's /slots then shows each slot's prompt as its template rendered it (tests read it).
    env["LLAMA_SERVER_SLOTS_DEBUG"] = "1"
    without_amx_repack(env)  # every llama-server a test or bench starts (monitor.llama.binary says why)
    if not env.get("LLAMA_SERVER_BIN"):
        result = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "build_llama_server.py")],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        env["LLAMA_SERVER_BIN"] = result.stdout.strip().splitlines()[-1]
    model = ensure_default_model(ROOT / "var" / "models")
    (models_dir / model.name).unlink(missing_ok=True)
    (models_dir / model.name).symlink_to(model)
    return dict(env)


def wait_until(check, timeout: float, what: str, process: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise RuntimeError(f"{what} exited with {process.returncode}:\n{tail}")
        try:
            if check():
                return
        except Exception:  # not up yet: refused, reset, 503 while loading
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{what} not ready after {timeout}s")


class Service:
    """A child process with its output in a log file."""

    def __init__(self, name: str, argv: list[str], run_dir: Path, env: dict | None = None):
        self.name = name
        self.argv = argv
        self.env = env or dict(os.environ)
        self.log_path = run_dir / f"{name}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=ROOT, start_new_session=True
        )
        log.close()

    def kill(self) -> None:
        """SIGKILL: the fault the tests inject."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    @property
    def running(self) -> bool:
        return bool(self.process and self.process.poll() is None)


class LlamaServer(Service):
    """The product's own llama-server: the supervisor, its router, one instance per loaded profile."""

    def __init__(self, run_dir: Path, env: dict):
        argv = [sys.executable, str(ROOT / "manage.py"), "run_llama_server"]
        super().__init__("llama-server", argv, run_dir, env)
        self.url = os.environ["LLAMA_SERVER_URL"]
        self.headers = {"Authorization": f"Bearer {env['LLAMA_API_KEY']}"}

    def models(self) -> dict[str, dict]:
        data = httpx.get(self.url + "/models", headers=self.headers, timeout=5).json()["data"]
        return {model["id"]: model["status"] for model in data}

    @property
    def model_id(self) -> str:
        """The loaded instance of the default profile (the one chat uses)."""
        from monitor.nodes.registry import placement_here
        from monitor.profiles.presets import live_id
        from monitor.profiles.selectors import find_profile

        profile = find_profile(None)
        return live_id(profile, placement_here(profile))

    def healthy(self) -> bool:
        if httpx.get(self.url + "/health", timeout=2).status_code != 200:
            return False
        return self.models().get(self.model_id, {}).get("value") == "loaded"

    def start(self) -> None:
        super().start()
        wait_until(self.healthy, 120, "llama-server", self.process, self.log_path)

    def router_pid(self) -> int:
        from monitor.router.supervisor import read_pid, router_pid_path

        return read_pid(router_pid_path())

    def instance_pid(self, model_id: str | None = None) -> int:
        """The router's child process that serves ``model_id`` (the default profile's by default)."""
        model_id = model_id or self.model_id
        router = psutil.Process(self.router_pid())
        for child in router.children():
            try:
                if model_id in " ".join(child.cmdline()):
                    return child.pid
            except psutil.Error:  # an instance that just exited (a zombie until the router reaps it)
                continue
        raise LookupError(f"no instance of {model_id} runs")

    def slots(self, model_id: str | None = None) -> list[dict]:
        params = {"model": model_id or self.model_id}
        return httpx.get(self.url + "/slots", params=params, headers=self.headers, timeout=5).json()

    def tokens_predicted(self, model_id: str | None = None) -> int:
        """How many tokens the instance has generated since it started (its Prometheus counter, which
        counts an answer's tokens as its slot is released, before the next request is served)."""
        params = {"model": model_id or self.model_id}
        metrics = httpx.get(self.url + "/metrics", params=params, headers=self.headers, timeout=5).text
        return int(float(re.search(r"^llamacpp:tokens_predicted_total (\S+)$", metrics, re.M).group(1)))

    def wait_idle(self, model_id: str | None = None, timeout: float = 60) -> None:
        """Until no slot of the instance is generating (an earlier test's answer has ended)."""
        wait_until(
            lambda: not any(slot["is_processing"] for slot in self.slots(model_id)),
            timeout,
            "llama-server's slots to go idle",
        )

    def last_request(self, marker: str, model_id: str | None = None) -> dict:
        """The slot whose last request's prompt holds ``marker`` (a test's own words): llama-server's
        record of what it generated for it (``generated``, ``next_token[0]["n_decoded"]``)."""
        found = [slot for slot in self.slots(model_id) if marker in slot.get("prompt", "")]
        assert len(found) == 1, f"{len(found)} slots hold a request with {marker!r}"
        return found[0]


def start_redis(run_dir: Path) -> Service:
    """The run's Redis as `make run` has it: its default user's password and the nodes' users in its ACL file."""
    binary = redis_server_binary()
    if binary is None:
        raise RuntimeError("no redis-server available")
    write_redis_acl(run_dir)
    argv = redis_server_argv(binary, run_dir, urlsplit(os.environ["REDIS_URL"]).port) + ["--save", ""]
    service = Service("redis", argv, run_dir)
    service.start()
    import redis

    wait_until(
        lambda: redis.Redis.from_url(os.environ["REDIS_URL"]).ping(), 20, "redis", service.process, service.log_path
    )
    return service


def start_llama(run_dir: Path, *, slots_debug: bool = False) -> LlamaServer:
    """``slots_debug``: llama-server's own record of each slot's last request (its prompt and the text
    it generated) in GET /slots, what a test compares the app's delivered text with
    (``LlamaServer.last_request``); off for benchmarks, whose /slots reads it would make heavier."""
    from monitor.llama.binary import llama_environment

    env = llama_environment()
    if slots_debug:
        env["LLAMA_SERVER_SLOTS_DEBUG"] = "1"
    server = LlamaServer(run_dir, env)
    server.start()
    return server


class PlainLlamaServer(Service):
    """A single-model llama-server run from an argv (a profile's command line, a reference)."""

    def __init__(self, run_dir: Path, argv: list[str], env: dict, url: str, name: str = "llama-plain"):
        super().__init__(name, argv, run_dir, env)
        self.url = url

    def start(self) -> None:
        super().start()
        wait_until(
            lambda: httpx.get(self.url + "/health", timeout=2).status_code == 200, 120, "llama-server",
            self.process, self.log_path,
        )  # fmt: skip


def start_web(run_dir: Path) -> Service:
    port = os.environ["QWENWEB_PORT"]
    # The same launcher as `make run` (scripts/supervisor_config.py): Daphne gets the WebSocket limit from the settings.
    service = Service("daphne", [sys.executable, "-m", "qwenweb.serve", "--bind", "127.0.0.1", "--port", port], run_dir)
    service.start()
    wait_until(
        lambda: httpx.get(f"http://127.0.0.1:{port}/login/", timeout=2).status_code == 200,
        60,
        "daphne",
        service.process,
        service.log_path,
    )
    return service


def _worker(run_dir: Path, name: str, *options: str) -> Service:
    celery = str(Path(sys.executable).parent / "celery")
    argv = [celery, "-A", "qwenweb", "worker", "--loglevel", "INFO", "--concurrency", "1"]
    return Service(name, [*argv, "--without-gossip", "--without-mingle", "--pool", "solo", *options], run_dir)


class Workers:
    """The default worker and the documents' own worker, as `make run` has them (one task at a
    time each, to keep the tests small); killed and started together, as one fault."""

    def __init__(self, run_dir: Path):
        from django.conf import settings

        self.default = _worker(run_dir, "celery", "--queues", f"celery,node.{settings.NODE_NAME}")
        self.documents = _worker(run_dir, "celery-documents", "--queues", "documents", "--hostname", "documents@%h")
        self.log_path = self.default.log_path

    def start(self) -> None:
        self.default.start()
        self.documents.start()

    def kill(self) -> None:
        self.default.kill()
        self.documents.kill()

    def stop(self) -> None:
        self.default.stop()
        self.documents.stop()

    @property
    def running(self) -> bool:
        return self.default.running and self.documents.running


def start_worker(run_dir: Path) -> Workers:
    workers = Workers(run_dir)
    workers.start()
    from qwenweb.celery import app

    def both_answer() -> bool:
        hosts = {host.split("@")[0] for reply in app.control.ping(timeout=0.5) or [] for host in reply}
        return {"celery", "documents"} <= hosts

    wait_until(both_answer, 60, "celery workers", workers.default.process, workers.log_path)
    return workers


def start_sampler(run_dir: Path) -> Service:
    """The dashboard's sampler (``manage.py run_sampler``), as `make run` runs it."""
    service = Service("sampler", [sys.executable, str(ROOT / "manage.py"), "run_sampler"], run_dir)
    service.start()
    import redis
    from django.conf import settings

    from monitor.telemetry.live import live_key

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    wait_until(lambda: client.llen(live_key(settings.NODE_NAME)) > 0, 60, "sampler", service.process, service.log_path)
    return service


def new_run_dir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


def _exit_on_signal(number, _frame) -> None:
    # Once: `timeout` signals the process and then its group, and a second SystemExit inside the
    # ``finally`` would cut the clean-up short.
    for each in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(each, signal.SIG_IGN)
    raise SystemExit(128 + number)


def end_on_signals() -> None:
    """In a benchmark: SIGTERM and SIGHUP raise SystemExit, so its ``finally`` stops what it started."""
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, _exit_on_signal)


def django_run_dir(prefix: str, **environment) -> Path:
    """A benchmark's run folder: settings pointed at it, Django set up, its database migrated.

    A SIGTERM or SIGHUP (a `timeout`, a closed terminal) ends the benchmark as Ctrl-C would, so that
    its ``finally`` stops the services it started instead of leaving them running (``end_on_signals``)."""
    end_on_signals()
    run_dir = new_run_dir(prefix)
    configure_environment(run_dir, **environment)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    return run_dir


@contextlib.contextmanager
def second_web_server(name: str, run_dir: Path, environment: dict[str, str]) -> Iterator[str]:
    """Another Daphne on the session's database and Redis, started with ``environment`` (the settings an
    office would set, e.g. directory or OIDC login), on a port of its own; its URL while the block runs."""
    port = str(free_port())
    env = {**os.environ, **environment, "QWENWEB_PORT": port}
    argv = [sys.executable, "-m", "qwenweb.serve", "--bind", "127.0.0.1", "--port", port]
    service = Service(name, argv, run_dir, env)
    service.start()
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: httpx.get(url + "/login/", timeout=2).status_code == 200, 60, name, service.process)
    try:
        yield url
    finally:
        service.stop()
