"""GPUs as NVML sees them; a machine without an NVIDIA driver simply has none."""

from __future__ import annotations

import warnings
from dataclasses import dataclass


@dataclass
class GpuInfo:
    index: int
    name: str
    total_bytes: int
    free_bytes: int


def detect_gpus() -> tuple[list[GpuInfo], str]:
    """(GPUs, why none were found) — the reason is empty when NVML answered."""
    try:
        with warnings.catch_warnings():
            # The pynvml wrapper asks for nvidia-ml-py, which it installs and imports itself.
            warnings.simplefilter("ignore", FutureWarning)
            import pynvml

        pynvml.nvmlInit()
    except Exception as error:  # no library, no driver, no permission: all mean "no GPU here"
        return [], str(error) or error.__class__.__name__
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append(GpuInfo(index, name.decode() if isinstance(name, bytes) else name, memory.total, memory.free))
        return gpus, ""
    except Exception as error:
        return [], str(error)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
