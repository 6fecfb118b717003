"""Secrets kept in files under the var/ folder, created on first use (mode 0600)."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def file_secret(path: Path, *, prefix: str = "", nbytes: int = 32) -> str:
    """Return the secret stored at ``path``, creating it atomically if missing."""
    with contextlib.suppress(FileNotFoundError):
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    value = prefix + secrets.token_urlsafe(nbytes)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(value + "\n")
    try:
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # fails if another process won the race; keep theirs
    finally:
        tmp.unlink()
    return path.read_text().strip()
