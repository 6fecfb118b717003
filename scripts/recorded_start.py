"""Record a process's start in ``var/run/programs``, then become the program (scripts and tests only).

Usage: ``python -I -S recorded_start.py RECORDS_DIR NAME -- ARGV...``

supervisord runs every program through this (scripts/supervisor_config.py), and `make run`
runs supervisord through it, so that a later run finds what this one left behind even when
supervisord was killed (scripts/leftovers.py). It appends one line to ``RECORDS_DIR/NAME``
(its pid, its start time in clock ticks since boot, its session) and ``exec``s the program:
the same pid, start time and process group, which supervisord made the program's own.
Standard library only, run without ``site``: one short Python start more per program start
(measured 0.09 s on the loaded 2-core development box, beside supervisord's 3 s ``startsecs``).
"""

from __future__ import annotations

import os
import sys


def start_ticks(pid: int | str) -> int | None:
    """A process's start time (clock ticks after boot) from ``/proc/PID/stat``; None when it is gone.
    With the pid it names one process for good: a pid used again has a later start."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # after the name, which may hold spaces
    except OSError:
        return None
    return int(fields[19])  # field 22 of proc(5); fields[0] here is field 3


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--":
        raise SystemExit("usage: recorded_start.py RECORDS_DIR NAME -- ARGV...")
    records, name, command = argv[0], argv[1], argv[3:]
    with open(os.path.join(records, name), "a") as record:
        record.write(f"{os.getpid()} {start_ticks('self')} {os.getsid(0)}\n")
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
