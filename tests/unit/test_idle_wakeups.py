"""What wakes the background processes while nobody works: CPU a small box takes from generation
(bench/cpu_bench.py, ``idle_app_cpu_pct``). A Celery worker's event loop, on the app's broker
transport (qwenweb/patches/broker.py), has no timer more often than every ten seconds, and its Redis pop
returns every 3 s (kombu's ``polling_interval``, set for workers only); the llama supervisor learns of
llama-server's exit from SIGCHLD instead of polling for it."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from kombu import Connection
from kombu.asynchronous import Hub
from kombu.transport import redis as kombu_redis

from monitor.router import supervisor
from qwenweb.celery import WORKER_POLL_S, app, configure_worker
from qwenweb.patches import broker


def _live_timers(transport_class) -> dict[str, float]:
    """{timer: seconds until it first fires} once ``transport_class`` joins an event loop."""
    transport = transport_class(Connection("redis://127.0.0.1:1/0"))
    hub = Hub()
    transport.register_with_event_loop(SimpleNamespace(client=SimpleNamespace(transport_options={})), hub)
    assert getattr(transport, "on_event_loop", True)
    now = time.monotonic()
    return {entry.fun.__name__: eta - now for eta, _priority, entry in hub.timer.queue if not entry.canceled}


def test_a_worker_pops_for_3_s_on_the_quiet_transport_and_everything_else_keeps_kombus():
    """A synchronous reader (the health check's ping) keeps kombu's 1 s pop: closing its channel waits for it."""
    conf = SimpleNamespace(broker_transport=None, broker_transport_options={"visibility_timeout": 60})
    configure_worker(conf)  # what a worker's start (Celery's celeryd_init) does to its configuration
    assert conf.broker_transport == "qwenweb.patches.broker:Transport"
    assert conf.broker_transport_options == {"visibility_timeout": 60, "polling_interval": WORKER_POLL_S}
    worker = Connection(
        "redis://127.0.0.1:1/0", transport=conf.broker_transport, transport_options=conf.broker_transport_options
    )
    assert isinstance(worker.transport, broker.Transport) and worker.transport.brpop_timeout == WORKER_POLL_S == 3
    web = app.connection_for_read()  # the web process, `manage.py health`: no worker start
    assert not isinstance(web.transport, broker.Transport) and web.transport.brpop_timeout == 1


def test_an_idle_workers_loop_has_no_timer_more_often_than_every_ten_seconds():
    kombus = _live_timers(kombu_redis.Transport)
    assert min(kombus.values()) < 1.5  # kombu's own: a binding check every second
    ours = _live_timers(broker.Transport)
    assert min(ours.values()) > 9, ours
    assert ours["maybe_refresh_binding_expiry"] == pytest.approx(broker.BINDING_CHECK_S, abs=1)
    assert set(ours) == set(kombus)  # every check still runs (health, restore, re-auth, bindings)


@pytest.fixture
def watcher() -> Iterator[supervisor.RouterSupervisor]:
    """A supervisor with its signal handlers installed in this process (the test's own put back after)."""
    numbers = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGCHLD)
    saved = {number: signal.getsignal(number) for number in numbers}
    saved_wakeup = signal.set_wakeup_fd(-1)
    watching = supervisor.RouterSupervisor("/bin/false")
    watching._install_signals()
    try:
        yield watching
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)
        signal.set_wakeup_fd(saved_wakeup)


class _NeverWoken(Exception):
    pass


@contextlib.contextmanager
def _failing_after(seconds: int) -> Iterator[None]:
    """A deadline for a wait that should end by a signal: SIGALRM raises out of it if none came (the
    supervisor's own look after a lost signal is set far beyond it). Nothing is timed."""

    def give_up(signum, frame) -> None:
        raise _NeverWoken(f"nothing woke the supervisor in {seconds} s")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _sleeps(watcher, monkeypatch) -> list[float]:
    """The seconds of each sleep the supervisor starts."""
    asked: list[float] = []
    real = watcher._sleep

    def sleep(seconds: float) -> None:
        asked.append(seconds)
        real(seconds)

    monkeypatch.setattr(watcher, "_sleep", sleep)
    return asked


def test_the_llama_supervisor_wakes_when_llama_server_exits(watcher, monkeypatch):
    monkeypatch.setattr(supervisor, "CHILD_CHECK_S", 3600.0)  # its look after a lost signal: never, here
    watcher.process = subprocess.Popen(["sleep", "0.3"])
    with _failing_after(60):
        watcher._wait()
    assert watcher.process.returncode == 0


def test_a_crash_loops_back_off_is_not_cut_short_by_the_exit_itself(watcher, monkeypatch):
    """llama-server dying at once (a broken preset) sets the wake-up before the supervisor waits for it."""
    watcher.process = subprocess.Popen(["/bin/false"])
    watcher.process.wait()  # exited, and reaped: as a poll() that finds it dead
    readable, _, _ = select.select([watcher._wake_r], [], [], 5)
    assert readable, "the exit's SIGCHLD never reached the supervisor"  # handled: the wake-up pipe has it
    watcher._wait()
    asked = _sleeps(watcher, monkeypatch)
    watcher._back_off(1.0)
    assert len(asked) == 1 and 0.9 < asked[0] <= 1.0  # one sleep, whole: the old wake-up did not end it
    asked.clear()
    watcher.stopping = True
    watcher._back_off(30.0)  # a stop asked for: no back-off at all
    assert asked == []


def test_a_signal_handler_of_the_supervisor_takes_no_lock(watcher):
    """Python runs a signal's handler between any two bytecodes of the main thread, also while the code it
    interrupted holds a lock: a handler that takes one (``threading.Event.set`` inside ``Event.wait``, as the
    supervisor's did) waits for it for good. Seen once in a whole-suite run: a supervisor deaf to a restart
    request. Its handlers only set flags; the signal itself wakes it (``set_wakeup_fd``)."""
    locking: list[str] = []

    def profile(frame, event, arg) -> None:
        if event == "call" and frame.f_code.co_filename == threading.__file__:
            locking.append(frame.f_code.co_qualname)  # Event, Condition, RLock: each takes a lock
        elif event == "c_call" and type(getattr(arg, "__self__", None)).__name__ in ("lock", "RLock"):
            locking.append(arg.__qualname__)

    for number in (signal.SIGCHLD, signal.SIGUSR1, signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(number)
        sys.setprofile(profile)
        try:
            handler(number, None)
        finally:
            sys.setprofile(None)
    assert locking == []
    assert watcher.restart_requested and watcher.stopping


def test_a_restart_request_from_another_thread_wakes_the_supervisor_at_once(watcher, monkeypatch):
    """The signal reaches whichever thread the kernel picks; its byte on the wake-up pipe wakes the wait."""
    monkeypatch.setattr(supervisor, "CHILD_CHECK_S", 3600.0)  # its look after a lost signal: never, here
    watcher.process = subprocess.Popen(["sleep", "600"])
    try:
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1)).start()
        with _failing_after(60):
            watcher._wait()
        assert watcher.restart_requested
    finally:
        watcher.process.kill()
        watcher.process.wait()
