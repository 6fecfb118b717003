"""Keeps the local llama-server (router mode) running, and restarts it when asked or when it dies.

The router itself loads, unloads and restarts model instances; this process only keeps
the router alive: it writes the presets, starts the router with an argv list (the API
key in the environment) writing to the log the admin pages read, records each start and
restart on the timeline, and restarts it when its heartbeat asks (a router that stopped answering, the
watchdog's daily restart) or on SIGUSR1 (``request_restart``, with the reason in a file beside the pid file).

A supervisor that is killed (SIGKILL, out of memory) leaves its router running, with its loaded models
and the answers streaming from them. The supervisor started in its place keeps that router when it is
the one it would start (the same binary, arguments and log file) and watches it by pid; any other is
stopped first (it holds the port).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil
from django.conf import settings
from django.utils.translation import gettext as _
from supervisor import childutils

from monitor import timeline
from monitor.llama.binary import llama_environment
from monitor.llama.client import LlamaClient, run_with_client
from monitor.llama.errors import LlamaError
from monitor.models import Event
from monitor.nodes import membership, readiness
from monitor.profiles.loading import load_startup_profiles
from monitor.profiles.presets import preset_path, write_preset
from monitor.router.heartbeat import Heartbeat

log = logging.getLogger(__name__)
LOG_ROTATE_BYTES = 20 * 1024 * 1024
QUICK_EXIT_S = 10.0
# llama-server's exit wakes the supervisor at once (SIGCHLD); it also looks this often, should a signal be lost.
CHILD_CHECK_S = 5.0
# A router kept from an earlier supervisor is not this process's child (no SIGCHLD): looked at this often.
KEPT_CHECK_S = 1.0
EXIT_UNKNOWN = -255  # the exit status of a process that was not this one's child


def run_dir() -> Path:
    path = Path(settings.VAR_DIR) / "run"
    path.mkdir(parents=True, exist_ok=True)
    return path


def supervisor_pid_path() -> Path:
    return run_dir() / "llama-supervisor.pid"


def router_pid_path() -> Path:
    return run_dir() / "llama-router.pid"


def restart_reason_path() -> Path:
    return run_dir() / "llama-restart-reason"


def router_argv(binary: str) -> list[str]:
    url = urlsplit(settings.LLAMA_SERVER_URL)
    return [
        binary,
        "--models-preset", str(preset_path()),
        # One instance to spare: a changed profile loads before the one it replaces is unloaded. Embeddings
        # and reranking profiles have their own limit beside the chat ones (``loading.trim``).
        "--models-max", str(settings.LLAMA_MODELS_MAX + settings.LLAMA_EMBED_MODELS_MAX + 1),
        "--no-models-autoload",  # every load goes through qwenweb, which records it and keeps the limit
        "--host", url.hostname or "127.0.0.1",
        "--port", str(url.port or 8081),
        "--no-webui",
    ]  # fmt: skip


def read_pid(path: Path) -> int | None:
    """The pid in ``path`` when that process is alive; None without a file, a number or a process."""
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
        return None
    return pid


def stop_orphaned_router(binary: str) -> None:
    """A router left running by a supervisor that was killed (SIGKILL, out of memory) still
    holds the port: stop it before starting a new one, or the new one cannot listen."""
    pid = read_pid(router_pid_path())
    if pid is None:
        return
    try:
        process = psutil.Process(pid)
        if Path(process.exe()).name != Path(binary).name:
            return  # the pid was reused by something else
        process.terminate()
        process.wait(settings.LLAMA_STOP_TIMEOUT_S + 5)
    except psutil.TimeoutExpired:
        process.kill()
    except psutil.Error:
        return
    log.warning("stopped an orphaned llama-server router (pid %s)", pid)


def router_to_keep(binary: str) -> psutil.Process | None:
    """The router an earlier supervisor of this node left running, when it is the one this supervisor
    would start: the same binary and arguments, its output going to the same log file (one whose output
    went to a pipe of the supervisor that died is not). None otherwise."""
    pid = read_pid(router_pid_path())
    if pid is None:
        return None
    try:
        process = psutil.Process(pid)
        same = (
            process.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_STOPPED)
            and os.path.realpath(process.exe()) == os.path.realpath(binary)
            and process.cmdline() == router_argv(binary)
            and os.readlink(f"/proc/{pid}/fd/1") == str(Path(settings.LLAMA_LOG_FILE).resolve())
        )
    except (psutil.Error, OSError):
        return None
    return process if same else None


class KeptRouter:
    """A router kept from an earlier supervisor, with the part of ``subprocess.Popen``'s interface the
    supervisor uses. It is not this process's child: its exit status is not known (``EXIT_UNKNOWN``)."""

    def __init__(self, process: psutil.Process):
        self._process = process
        self.pid = process.pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                running = self._process.status() != psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                running = False
            if not running:
                self.returncode = EXIT_UNKNOWN
        return self.returncode

    def terminate(self) -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            self._process.terminate()

    def kill(self) -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            self._process.kill()

    def wait(self, timeout: float) -> int:
        try:
            self._process.wait(timeout)
        except psutil.TimeoutExpired:
            raise subprocess.TimeoutExpired(str(self.pid), timeout) from None
        except psutil.NoSuchProcess:
            pass
        self.returncode = EXIT_UNKNOWN
        return self.returncode


def request_restart(reason: str) -> bool:
    """Ask the running supervisor to restart llama-server; False when there is none."""
    pid = read_pid(supervisor_pid_path())
    if pid is None:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        cmdline = b"run_llama_server"
    if b"run_llama_server" not in cmdline:
        return False  # a stale pid file naming some other process
    restart_reason_path().write_text(reason)
    os.kill(pid, signal.SIGUSR1)
    return True


class RouterSupervisor:
    def __init__(self, binary: str, *, out=None):
        self.binary = binary
        self.out = out or sys.stdout
        self.process: subprocess.Popen | KeptRouter | None = None
        self.stopping = False
        self.restart_requested = False
        self.removed = False
        # The main thread sleeps on this pipe, written by a handled signal (``set_wakeup_fd``) and the heartbeat
        # (``_nudge``); the handlers only set flags: one may run inside a lock the main thread holds.
        self._wake_r, self._wake_w = os.pipe()
        for end in (self._wake_r, self._wake_w):
            os.set_blocking(end, False)

    def _rotate_log(self) -> Path:
        path = Path(settings.LLAMA_LOG_FILE)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > LOG_ROTATE_BYTES:
            os.replace(path, path.with_suffix(".log.1"))
        return path

    def _start(self) -> subprocess.Popen:
        """A new router, writing to the log file itself: it outlives this process (see ``router_to_keep``)."""
        write_preset()
        log_path = self._rotate_log()
        with log_path.open("ab") as log_file:
            process = subprocess.Popen(
                router_argv(self.binary),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=llama_environment(),
            )
        router_pid_path().write_text(str(process.pid))
        self.out.write(f"llama-server router started (pid {process.pid}), its output in {log_path}\n")
        self.out.flush()
        self._load_in_background(process)
        return process

    def _keep(self, kept: KeptRouter) -> None:
        """Keep the router an earlier supervisor left running: it serves on; its profiles are loaded if
        they are not (and the presets rewritten: the router reads them again when they change)."""
        write_preset()
        self.out.write(f"llama-server router kept from the supervisor before this one (pid {kept.pid})\n")
        self.out.flush()
        self._load_in_background(kept)

    def _load_in_background(self, process: subprocess.Popen | KeptRouter) -> None:
        threading.Thread(target=self._load_startup_profiles, args=(process,), daemon=True).start()

    def _load_startup_profiles(self, process: subprocess.Popen | KeptRouter) -> None:
        """Once the router answers, load the default profile (and those marked load-on-start)."""

        async def work(client: LlamaClient) -> None:
            deadline = time.monotonic() + 120
            while process.poll() is None and time.monotonic() < deadline:
                try:
                    await client.list_models()
                    break
                except LlamaError:
                    await asyncio.sleep(0.1)
            for failure in await load_startup_profiles(client):
                log.error("startup profile did not load: %s", failure)

        run_with_client(work)

    def _stop_router(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(settings.LLAMA_STOP_TIMEOUT_S + 5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def _on_stop(self, signum, frame) -> None:
        self.stopping = True

    def _on_restart(self, signum, frame) -> None:
        self.restart_requested = True

    def _on_child(self, signum, frame) -> None:
        """Nothing to do: a handled signal writes to the wake-up pipe, and ``_wait`` looks at the process."""

    def _nudge(self) -> None:
        """Wake the main thread from another thread (the heartbeat's)."""
        with contextlib.suppress(BlockingIOError):  # full: it is awake already
            os.write(self._wake_w, b"!")

    def _sleep(self, seconds: float) -> None:
        """Until a signal or a nudge comes, or ``seconds`` pass."""
        select.select([self._wake_r], [], [], seconds)
        self._drain()

    def _drain(self) -> None:  # the wake-ups so far: their flags say what they asked
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 4096):
                pass

    def _ask_restart(self, reason: str) -> None:
        """The heartbeat's request (a router that accepts connections but does not answer) or its
        watchdog's (the daily restart)."""
        restart_reason_path().write_text(reason)
        self.restart_requested = True
        self._nudge()

    def _on_removed(self, message: str) -> None:
        """The heartbeat's news: the main box removed this node. Say so, leave the reason for `make node`
        to print, and stop every part of the node (its supervisord), not only this one."""
        log.error(message)
        self.removed = True
        membership.removed_path(Path(settings.VAR_DIR)).write_text(message + "\n")
        self.stopping = True
        self._nudge()
        if "SUPERVISOR_SERVER_URL" in os.environ:  # under supervisord (make node): it stops them all
            try:
                childutils.getRPCInterface(os.environ).supervisor.shutdown()
            except Exception:  # supervisord already going: it stops this process anyway
                log.warning("could not ask supervisord to stop the node", exc_info=True)

    def _router_pid(self) -> int | None:
        process = self.process
        return process.pid if process is not None and process.poll() is None else None

    def _install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGUSR1, self._on_restart)
        signal.signal(signal.SIGCHLD, self._on_child)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)

    def _back_off(self, seconds: float) -> None:
        """Crash loop: wait before the next start, so a broken preset does not spin the CPU. Only a
        stop or a restart request cuts it short: the exit's own SIGCHLD (set before ``_wait`` ever
        waited, when llama-server died at once) is forgotten first."""
        self._drain()
        deadline = time.monotonic() + seconds
        while not self.stopping and not self.restart_requested and (left := deadline - time.monotonic()) > 0:
            self._sleep(left)

    def _wait(self) -> None:
        """Until llama-server exits or a stop or restart is asked: a signal wakes it, no polling."""
        check_s = KEPT_CHECK_S if isinstance(self.process, KeptRouter) else CHILD_CHECK_S
        while self.process.poll() is None and not self.stopping and not self.restart_requested:
            self._sleep(check_s)

    def run(self) -> None:
        self._install_signals()
        supervisor_pid_path().write_text(str(os.getpid()))
        kept = router_to_keep(self.binary)
        if kept is None:
            stop_orphaned_router(self.binary)
        else:
            self.process = KeptRouter(kept)  # this process's to stop from now on, even if asked to at once
        reason = ""
        quick_exits = 0
        heartbeat = Heartbeat(self._router_pid, self._ask_restart, self._on_removed)
        heartbeat.start()
        try:
            while not self.stopping:
                started = time.monotonic()
                if kept is not None:
                    kept = None
                    self._keep(self.process)
                    message = _("The llama-server supervisor started again; llama-server kept running.")
                    timeline.record(Event.Kind.SERVER_STARTED, message, pid=self.process.pid)
                else:
                    self.process = self._start()
                    if reason:
                        timeline.record(
                            Event.Kind.SERVER_RESTARTED, reason, level=Event.Level.WARNING, pid=self.process.pid
                        )
                    else:
                        timeline.record(Event.Kind.SERVER_STARTED, _("llama-server started."), pid=self.process.pid)
                self._wait()
                if self.stopping:
                    break
                if self.restart_requested:
                    self.restart_requested = False
                    try:
                        asked = restart_reason_path().read_text().strip()
                    except OSError:
                        asked = ""
                    reason = _("Restarted on request: %(why)s") % {"why": asked or _("no reason given")}
                    self._stop_router()
                    quick_exits = 0
                    continue
                code = self.process.returncode
                if code == EXIT_UNKNOWN:
                    reason = _("llama-server exited and was restarted.")
                else:
                    reason = _("llama-server exited with code %(code)s and was restarted.") % {"code": code}
                quick_exits = quick_exits + 1 if time.monotonic() - started < QUICK_EXIT_S else 0
                if quick_exits:
                    self._back_off(min(2**quick_exits, 30))
        finally:
            heartbeat.stop()
            self._stop_router()
            try:
                if not self.removed:  # a removed node is out already, and Redis no longer lets it in
                    readiness.withdraw_node(settings.NODE_NAME)  # out of every pool now, not when the beat expires
            except Exception:
                log.warning("could not withdraw the node's readiness", exc_info=True)
            for path in (router_pid_path(), supervisor_pid_path()):
                path.unlink(missing_ok=True)
