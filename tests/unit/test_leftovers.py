"""What a killed supervisord leaves running is found from the run's records and stopped; nothing else is touched.

Real processes stand in for supervisord and its programs, started through the recorder as
`make run` starts them: a "supervisord" that starts a "program" in a process group of its own
(as supervisord does), the program a child in its group (as the llama supervisor starts
llama-server's router); then the "supervisord" is SIGKILLed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from scripts.leftovers import (
    alive,
    describe,
    new_run,
    processes_of_run,
    read_records,
    recorded,
    records_dir,
    running_supervisord,
    stop,
    wait_gone,
)
from scripts.recorded_start import start_ticks
from tests.support.stack import wait_until

SLEEPER = "import time; time.sleep(600)"
# A program: a child in its own process group, then it sleeps.
PROGRAM = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {SLEEPER!r}]); time.sleep(600)"
# A stand-in supervisord: its one program (an argv in JSON) in a new process group, then it sleeps.
SUPERVISORD = (
    "import json, subprocess, sys, time; subprocess.Popen(json.loads(sys.argv[1]), process_group=0); time.sleep(600)"
)
# A program that ignores SIGTERM, and says so by creating the file it is given.
IGNORES_SIGTERM = (
    "import pathlib, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "pathlib.Path({!r}).touch(); time.sleep(600)"
)


@pytest.fixture
def started():
    processes: list[subprocess.Popen] = []

    def start(argv: list[str]) -> subprocess.Popen:
        processes.append(subprocess.Popen(argv))
        return processes[-1]

    yield start
    for process in processes:
        process.kill()
        process.wait(10)


def a_run(var_dir: Path, started, program: str = PROGRAM, members: int = 2) -> subprocess.Popen:
    """supervisord and one program "web" (with ``members`` processes in its group), started as `make run` starts them."""
    new_run(var_dir)
    program_argv = recorded(var_dir, "web", [sys.executable, "-c", program])
    supervisor = started(
        recorded(var_dir, "supervisord", [sys.executable, "-c", SUPERVISORD, json.dumps(program_argv)])
    )
    wait_until(lambda: len(processes_of_run(var_dir)) == 1 + members, 20, "the run's processes")
    return supervisor


def program_pid(var_dir: Path) -> int:
    return next(record.pid for record in read_records(var_dir) if record.name == "web")


@pytest.fixture
def cleanup():
    folders: list[Path] = []
    yield folders.append
    for var_dir in folders:
        stop(processes_of_run(var_dir), 1)


def test_a_killed_supervisords_programs_are_found_from_the_records_and_stopped(tmp_path, started, cleanup):
    ours, other = tmp_path / "ours", tmp_path / "other"
    cleanup(ours), cleanup(other)
    supervisor = a_run(ours, started)
    a_run(other, started)  # another folder's run, alive
    unrecorded = started([sys.executable, "-c", SLEEPER])  # same session, never recorded
    leader = psutil.Process(program_pid(ours))
    child = leader.children()[0]

    found = processes_of_run(ours)
    assert [(left.part, left.process.pid) for left in found] == [
        ("supervisord", supervisor.pid), *sorted([("web", leader.pid), ("web", child.pid)])
    ]  # fmt: skip
    assert os.getpgid(leader.pid) == leader.pid != os.getpgid(supervisor.pid)  # a group of its own
    assert os.getpgid(child.pid) == leader.pid  # the program's child is in its group
    assert running_supervisord(ours).pid == supervisor.pid
    assert describe(found)[0] == f"supervisord: {supervisor.pid} (python)"
    assert describe(found)[1].startswith("web: ")

    supervisor.kill()
    supervisor.wait(10)
    assert running_supervisord(ours) is None
    left = processes_of_run(ours)
    assert sorted(leftover.process.pid for leftover in left) == sorted([leader.pid, child.pid])

    assert stop(left, 10) == []
    assert not alive(leader) and not alive(child)
    assert len(processes_of_run(other)) == 3 and alive(psutil.Process(unrecorded.pid))
    assert processes_of_run(ours) == []


def test_a_program_killed_alone_leaves_its_child_found_through_its_group(tmp_path, started, cleanup):
    cleanup(tmp_path)
    a_run(tmp_path, started)
    leader = psutil.Process(program_pid(tmp_path))
    child = leader.children()[0]
    os.kill(leader.pid, signal.SIGKILL)
    wait_until(lambda: not alive(leader), 10, "the program's death")
    assert [left.process.pid for left in processes_of_run(tmp_path) if left.part == "web"] == [child.pid]


def test_a_recorded_pid_with_another_start_time_is_never_signalled(tmp_path, started):
    """The record of a process long gone whose pid another process has now: that process is not the run's."""
    stranger = started([sys.executable, "-c", SLEEPER])
    wait_until(lambda: start_ticks(stranger.pid) is not None, 10, "the stranger")
    new_run(tmp_path)
    line = f"{stranger.pid} {start_ticks(stranger.pid) - 1} {os.getsid(0)}\n"
    (records_dir(tmp_path) / "web").write_text(line)
    (records_dir(tmp_path) / "supervisord").write_text(line)
    assert processes_of_run(tmp_path) == []
    assert running_supervisord(tmp_path) is None


def test_a_process_that_ignores_sigterm_is_killed_after_the_wait(tmp_path, started, cleanup):
    cleanup(tmp_path)
    ignoring = tmp_path / "ignoring"
    supervisor = a_run(tmp_path, started, IGNORES_SIGTERM.format(str(ignoring)), members=1)
    supervisor.kill()
    supervisor.wait(10)
    wait_until(ignoring.exists, 10, "the program's SIGTERM handler")
    program = psutil.Process(program_pid(tmp_path))
    assert stop(processes_of_run(tmp_path), 0.5) == []
    assert wait_gone([program], 0) == []


def test_nothing_recorded_finds_nothing(tmp_path):
    assert processes_of_run(tmp_path) == []
    new_run(tmp_path)
    assert processes_of_run(tmp_path) == [] and running_supervisord(tmp_path) is None
