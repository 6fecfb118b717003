"""llama-server's log as the supervisor writes it, and the part of it that belongs to one instance.

The router prints ``spawning server instance with name=ID on port P`` and then forwards
that instance's output with a ``[P]`` prefix; its own lines about the instance name it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from django.conf import settings

TAIL_BYTES = 2 * 1024 * 1024


def _read_tail(path: Path) -> list[str]:
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(size - TAIL_BYTES, 0))
            return handle.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def instance_log_tail(model_id: str, lines: int = 40) -> list[str]:
    """The last lines of the most recent start of ``model_id`` (empty when it never started)."""
    text = _read_tail(Path(settings.LLAMA_LOG_FILE))
    spawn = re.compile(rf"spawning server instance with name={re.escape(model_id)} on port (\d+)")
    start, port = None, None
    for index, line in enumerate(text):
        if match := spawn.search(line):
            start, port = index, match.group(1)
    if start is None:
        return []
    prefix = re.compile(rf"^\[\s*{port}\]")
    mentions = f"name={model_id}"
    return [line for line in text[start:] if prefix.match(line) or mentions in line][-lines:]
