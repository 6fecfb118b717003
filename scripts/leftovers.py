"""What a run of the stack leaves running when its supervisord dies without stopping it (scripts and tests only).

supervisord starts each program in a process group of its own, so when supervisord itself is
killed (SIGKILL, the out-of-memory killer) every program keeps running and holding its port,
and the next run's web server exits over and over ("address in use"). So every start is
recorded: supervisord and each program are started through ``scripts/recorded_start.py``,
which appends the process's pid, start time and session to ``var/run/programs/NAME`` before it
becomes the program. The next `make run` (and the boot service, which runs it) and `make stop`
read those records and stop what is still alive: SIGTERM to all, a wait, SIGKILL to the rest.

What counts as the run's:
- a recorded program whose pid still has the recorded start time, and every process in its
  process group (the program's own, as supervisord made it; the kernel gives the group's number
  to no other group while its leader lives). llama-server's router and the model instances it
  spawns are in the llama program's group (neither makes a group of its own), Celery's pool in
  its worker's;
- a process in a recorded group whose leader is gone (a program killed alone, its children
  living on), when it is in the recorded session and started after the leader: the group's
  number stays taken while any member lives, so only a wrap-around of pids could put a stranger
  there;
- supervisord itself, alone: under `make run` it shares the process group of `make` and the terminal.
A pid whose start time is not the recorded one belongs to another process and is never
signalled (psutil checks the start time again before each signal). Command lines are not
compared: Redis rewrites its own, and its environment, as it starts.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from scripts.recorded_start import start_ticks

RECORDER = Path(__file__).resolve().parent / "recorded_start.py"
SUPERVISORD = "supervisord"


@dataclass(frozen=True)
class Record:
    """One start: the program's name, its pid, start time (clock ticks after boot) and session."""

    name: str
    pid: int
    ticks: int
    sid: int

    def is_alive(self) -> bool:
        return start_ticks(self.pid) == self.ticks


@dataclass(frozen=True)
class Leftover:
    """One process of a run: the part it belongs to (a program's name, or supervisord) and the process."""

    part: str
    process: psutil.Process

    def label(self) -> str:
        try:
            return f"{self.process.pid} ({self.process.name()})"
        except psutil.Error:
            return str(self.process.pid)


def records_dir(var_dir: Path) -> Path:
    return var_dir / "run" / "programs"


def recorded(var_dir: Path, name: str, argv: list[str]) -> list[str]:
    """``argv`` started through the recorder: the start noted under ``name``, then the program itself."""
    return [sys.executable, "-I", "-S", str(RECORDER), str(records_dir(var_dir)), name, "--", *argv]


def new_run(var_dir: Path) -> None:
    """Forget the last run's records (its processes are stopped by now) before a new one starts."""
    shutil.rmtree(records_dir(var_dir), ignore_errors=True)
    records_dir(var_dir).mkdir(parents=True)


def read_records(var_dir: Path) -> list[Record]:
    found = []
    for path in sorted(records_dir(var_dir).glob("*")):
        for line in path.read_text().splitlines():
            try:
                pid, ticks, sid = (int(field) for field in line.split())
            except ValueError:
                continue  # a line cut short by a crash
            found.append(Record(path.name, pid, ticks, sid))
    return found


def process_groups() -> dict[int, list[psutil.Process]]:
    """Every live process by its process group."""
    groups: dict[int, list[psutil.Process]] = {}
    for process in psutil.process_iter():
        try:
            groups.setdefault(os.getpgid(process.pid), []).append(process)
        except OSError:
            continue
    return groups


def _in_orphaned_group(process: psutil.Process, record: Record) -> bool:
    """A member of a recorded group whose leader is gone: started after it, in its session."""
    try:
        return os.getsid(process.pid) == record.sid and (start_ticks(process.pid) or -1) >= record.ticks
    except OSError:
        return False


def processes_of_run(var_dir: Path) -> list[Leftover]:
    """Every live process of the recorded run, supervisord first; [] when nothing is recorded."""
    records = read_records(var_dir)
    groups = process_groups() if records else {}
    found: dict[int, Leftover] = {}
    for record in records:
        if record.name == SUPERVISORD:
            members = [process for group in groups.values() for process in group if process.pid == record.pid]
            members = members if record.is_alive() else []
        elif record.is_alive():
            members = groups.get(record.pid, [])
        else:
            members = [process for process in groups.get(record.pid, []) if _in_orphaned_group(process, record)]
        for process in members:
            if process.pid != os.getpid() and alive(process):
                found.setdefault(process.pid, Leftover(record.name, process))
    return sorted(found.values(), key=lambda left: (left.part != SUPERVISORD, left.part, left.process.pid))


def running_supervisord(var_dir: Path) -> psutil.Process | None:
    """The recorded run's supervisord, when it is still alive."""
    return next((left.process for left in processes_of_run(var_dir) if left.part == SUPERVISORD), None)


def alive(process: psutil.Process) -> bool:
    """Running, and not a zombie (a dead process its parent has not reaped holds no port)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def wait_gone(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process has exited (a zombie counts as exited); returns those still alive."""
    deadline = time.monotonic() + timeout
    running = [process for process in processes if alive(process)]
    while running and time.monotonic() < deadline:
        time.sleep(0.1)
        running = [process for process in running if alive(process)]
    return running


def _signal(processes: list[psutil.Process], method: Callable[[psutil.Process], None]) -> None:
    for process in processes:
        try:
            method(process)
        except psutil.Error:  # gone already; a reused pid is refused by psutil itself
            pass


def stop(leftovers: list[Leftover], wait_s: float) -> list[Leftover]:
    """SIGTERM to every process at once (each part stops its own children on it), ``wait_s`` for
    them to exit, then SIGKILL; returns what is still alive after that."""
    processes = [leftover.process for leftover in leftovers]
    _signal(processes, psutil.Process.terminate)
    running = wait_gone(processes, wait_s)
    _signal(running, psutil.Process.kill)
    survivors = {process.pid for process in wait_gone(running, 10)}
    return [leftover for leftover in leftovers if leftover.process.pid in survivors]


def describe(leftovers: list[Leftover]) -> list[str]:
    """One line per part: ``web: 1234 (python)``, ``llama: 1240 (python), 1250 (llama-server)``."""
    parts: dict[str, list[str]] = {}
    for leftover in leftovers:
        parts.setdefault(leftover.part, []).append(leftover.label())
    return [f"{part}: {', '.join(labels)}" for part, labels in parts.items()]
