"""The daily restart fires once per day, at the first check after its time."""

import datetime as dt

from monitor.router.watchdog import daily_restart_due


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
