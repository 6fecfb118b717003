"""The local llama-server program: where its binary is, and the environment it runs with.

The API key travels in the environment, not argv, so it does not show in ``ps``.
"""

from __future__ import annotations

import os
import shutil

from django.conf import settings


def llama_server_binary() -> str:
    explicit = os.environ.get("LLAMA_SERVER_BIN")
    if explicit:
        return explicit
    found = shutil.which("llama-server")
    if found:
        return found
    raise FileNotFoundError("llama-server not found: set LLAMA_SERVER_BIN or run `make setup`")


def llama_environment() -> dict[str, str]:
    """Environment for the llama-server process: the API key, nothing on argv."""
    env = dict(os.environ)
    env["LLAMA_API_KEY"] = settings.LLAMA_API_KEY
    return env
