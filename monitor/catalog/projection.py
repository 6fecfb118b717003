"""llama.cpp's own projection of a launch: the compute memory per device.

llama-server's ``--fit`` step (on by default, ``common/fit.cpp``) loads the model and
builds its contexts with ``no_alloc`` before anything is allocated, and prints a
"memory breakdown" table per device: ``self = model + context + compute`` in whole
MiB (rounded down). We start llama-server with the plan's flags, read those tables
and stop it at the end of the fit step, before it loads weights. The compute
figures are llama.cpp's reserved graph sizes, not a formula.
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from monitor.catalog.planner import MIB, Plan, plan_flags

_ROW = re.compile(r"common_memory_breakdown_print: \|\s+- (.+?)\s*\|[^=|]*?(\d+) =\s*(\d+) \+\s*(\d+) \+\s*(\d+)")
_END = "common_fit_params:"  # success or failure, the fit step is over
HOST_DEVICES = ("Host", "CPU_REPACK")


class ProjectionError(RuntimeError):
    """llama.cpp gave no projection; the message says why, fit to show."""


@dataclass
class DeviceProjection:
    name: str
    compute: int  # bytes


@dataclass
class Projection:
    devices: list[DeviceProjection] = field(default_factory=list)

    def _compute(self, host: bool) -> int:
        return sum(d.compute for d in self.devices if (d.name.split(" ")[0] in HOST_DEVICES) == host)

    @property
    def compute_gpu(self) -> int:
        return self._compute(host=False)

    @property
    def compute_cpu(self) -> int:
        return self._compute(host=True)


def parse_projection(log_text: str) -> Projection:
    """The breakdown tables of the fit step, summed per device (one table per context: target, MTP draft)."""
    by_name: dict[str, DeviceProjection] = {}
    for line in log_text.splitlines():
        if _END in line:
            break
        match = _ROW.search(line)
        if match:
            entry = by_name.setdefault(match.group(1), DeviceProjection(match.group(1), 0))
            # Printed rounded down to whole MiB: half a MiB is the expected remainder.
            entry.compute += int(match.group(5)) * MIB + MIB // 2
    return Projection(list(by_name.values()))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def llama_projection(binary: str, model_path: Path, flags: list[str], timeout: float = 60) -> Projection:
    """Run llama-server's fit step for ``model_path`` with ``flags`` (argv, no shell) and read its projection."""
    argv = [binary, "--model", str(model_path), "--host", "127.0.0.1", "--port", str(_free_port()),
            "--no-webui", "--log-verbosity", "4", *flags]  # fmt: skip
    try:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as error:
        raise ProjectionError(f"llama-server could not be started: {error}") from error
    lines: list[str] = []
    watchdog = threading.Timer(timeout, process.kill)  # a server that stops talking is stopped
    watchdog.start()
    try:
        for line in process.stdout:
            lines.append(line)
            if _END in line:
                break
    finally:
        watchdog.cancel()
        process.kill()
        process.wait(timeout=30)
        process.stdout.close()
    projection = parse_projection("".join(lines))
    if not projection.devices:
        tail = "".join(lines[-3:]).strip()
        raise ProjectionError(f"llama-server printed no memory projection for these settings ({tail[-300:]})")
    return projection


def use_llama_compute(result: Plan, binary: str, model_path: Path) -> None:
    """Put llama.cpp's projected compute buffers in the plan instead of the estimate (raises ProjectionError)."""
    projection = llama_projection(binary, model_path, plan_flags(result.request))
    result.compute_gpu, result.compute_cpu = projection.compute_gpu, projection.compute_cpu
    result.compute_source = "llama.cpp"
