"""The watchdog's schedule: the daily restart fires once per day, at the first look after its time; a
supervisor started after that time counts as the day's restart; looks come every interval, and never
while a reload is under way (tests/integration/test_profile_serving.py and test_nodes.py run it for real)."""

import datetime as dt
import threading
from types import SimpleNamespace

import pytest
from django.test import override_settings
from django.utils import timezone

from monitor.router import watchdog as module
from monitor.router.watchdog import Watchdog, daily_restart_due


def test_daily_restart_waits_for_its_time_and_fires_once_a_day():
    morning = dt.datetime(2026, 11, 30, 4, 29)
    assert not daily_restart_due(morning, "04:30", None)
    at = dt.datetime(2026, 11, 30, 4, 30)
    assert daily_restart_due(at, "04:30", None)
    assert daily_restart_due(at, "04:30", "2026-11-29")
    assert not daily_restart_due(at.replace(hour=5), "04:30", "2026-11-30")
    assert daily_restart_due(dt.datetime(2026, 12, 1, 6, 0), "04:30", "2026-11-30")


def test_a_malformed_time_never_restarts():
    assert not daily_restart_due(dt.datetime(2026, 11, 30, 12, 0), "noon", None)


@pytest.fixture
def clock(monkeypatch):
    """The server's local time, set by the test; no startup profile has died."""
    now = {"at": timezone.make_aware(dt.datetime(2026, 11, 30, 4, 0))}
    monkeypatch.setattr(module.timezone, "localtime", lambda *args: now["at"])
    monkeypatch.setattr(module, "died", lambda models: [])
    return now


@override_settings(LLAMA_DAILY_RESTART="04:30", WATCHDOG_INTERVAL_S=15)
def test_the_daily_restart_is_asked_once_at_its_time(clock):
    asked: list[str] = []
    watchdog = Watchdog(asked.append)
    assert watchdog.look([]) == ["ok"]
    clock["at"] = clock["at"].replace(minute=31)
    assert watchdog.look([]) == ["daily restart"] and asked == ["daily restart at 04:30"]
    clock["at"] = clock["at"].replace(hour=23)
    assert watchdog.look([]) == ["ok"] and len(asked) == 1
    clock["at"] += dt.timedelta(hours=6)  # the next day, past its time
    assert watchdog.look([]) == ["daily restart"] and len(asked) == 2


@override_settings(LLAMA_DAILY_RESTART="04:30", WATCHDOG_INTERVAL_S=15)
def test_a_supervisor_started_after_the_time_counts_as_the_days_restart(clock):
    clock["at"] = clock["at"].replace(hour=9)
    asked: list[str] = []
    watchdog = Watchdog(asked.append)
    assert watchdog.look([]) == ["ok"] and asked == []


@override_settings(WATCHDOG_INTERVAL_S=15)
def test_looks_come_every_interval_and_zero_turns_it_off(clock, monkeypatch):
    watchdog = Watchdog(lambda reason: None)
    assert not watchdog.due()  # the first look one interval after the start
    monkeypatch.setattr(module.time, "monotonic", lambda: watchdog.next_at + 0.1)
    assert watchdog.due()
    with override_settings(WATCHDOG_INTERVAL_S=0):
        assert not Watchdog(lambda reason: None).due()


@override_settings(WATCHDOG_INTERVAL_S=15)
def test_no_second_reload_while_one_is_under_way(clock, monkeypatch):
    """A load can take minutes: the looks meanwhile start no other, and a profile that failed to load
    lately is not tried again at every look."""
    started: list[list] = []
    release = threading.Event()
    dead = [(SimpleNamespace(name="big"), {"exit_code": -9})]
    monkeypatch.setattr(module, "died", lambda models: dead)
    monkeypatch.setattr(module, "_failed_recently", lambda name: False)
    monkeypatch.setattr(module, "reload_all", lambda found: started.append(found) or release.wait(10))
    watchdog = Watchdog(lambda reason: None)
    assert watchdog.look([]) == ["reloading big"]
    assert watchdog.look([]) == ["a reload is under way"]
    release.set()
    watchdog.reloading.join(10)
    assert started == [dead]
    monkeypatch.setattr(module, "_failed_recently", lambda name: True)
    assert watchdog.look([]) == ["big failed to load lately; not retried yet"] and len(started) == 1
