"""Reading settings from the environment: the helpers every settings module uses, and the var folder."""

from __future__ import annotations

import os
from pathlib import Path

VAR_DIR = Path(os.environ.get("QWENWEB_VAR_DIR", Path(__file__).resolve().parent.parent / "var")).resolve()


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in ("1", "true", "yes", "on")


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]
