"""Reading settings from the environment: the helpers every settings module uses, and the var folder."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

VAR_DIR = Path(os.environ.get("QWENWEB_VAR_DIR", Path(__file__).resolve().parent.parent / "var")).resolve()


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_names(name: str, default: str, allowed: tuple[str, ...]) -> list[str]:
    """A comma-separated list of names from ``allowed`` (an allowlist: any other name stops the start)."""
    names = env_list(name, default)
    if unknown := [item for item in names if item not in allowed]:
        raise ImproperlyConfigured(f"{name}: {', '.join(unknown)} is not one of {', '.join(allowed)}")
    return names
