"""The local llama-server program: where its binary is, and the environment it runs with.

The API key travels in the environment, not argv, so it does not show in ``ps``.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

from django.conf import settings


def llama_server_binary() -> str:
    found = os.environ.get("LLAMA_SERVER_BIN") or shutil.which("llama-server")
    if not found:
        raise FileNotFoundError("llama-server not found: set LLAMA_SERVER_BIN or run `make setup`")
    return found


def llama_environment() -> dict[str, str]:
    """Environment for the llama-server process: the API key, nothing on argv."""
    env = dict(os.environ)
    without_amx_repack(env)
    env["LLAMA_API_KEY"] = settings.LLAMA_API_KEY
    return env


@functools.cache
def cpu_has_amx(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    try:
        flags = next((line for line in cpuinfo.read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        return False
    return "amx_int8" in flags.split()


def without_amx_repack(env: dict) -> None:
    """On a CPU with AMX, llama-server (built for the host, so with ggml's AMX kernels) crashes at its first
    matrix multiply (SIGSEGV in ggml_backend_amx_mul_mat, llama.cpp 11434, a Xeon with amx_int8): weight
    repacking, which puts the weights in AMX's buffer, is turned off there (llama-server's own
    LLAMA_ARG_REPACK; children of the router inherit it). An explicit LLAMA_ARG_REPACK, or a profile's
    ``--repack``, still wins."""
    if cpu_has_amx():
        env.setdefault("LLAMA_ARG_REPACK", "false")
