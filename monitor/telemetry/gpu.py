"""GPUs as NVML sees them; a machine without an NVIDIA driver simply has none.

``detect_gpus`` answers once (the planner); ``NvmlSampler`` keeps NVML open in a
long-lived process and reads every GPU's figures once per call (the dashboard).
"""

from __future__ import annotations

import warnings
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any


@dataclass
class GpuInfo:
    index: int
    name: str
    total_bytes: int
    free_bytes: int


@dataclass
class GpuSample:
    """One GPU at one moment; a figure the device does not report stays None."""

    index: int
    name: str
    total_bytes: int
    used_bytes: int
    utilization_pct: float | None = None
    memory_utilization_pct: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    throttle_reasons: list[str] = field(default_factory=list)


# NVML's clock event ("throttle") reason bits, named as nvidia-smi names them.
THROTTLE_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def throttle_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if mask & bit]


def _nvml():
    with warnings.catch_warnings():
        # The pynvml wrapper asks for nvidia-ml-py, which it installs and imports itself.
        warnings.simplefilter("ignore", FutureWarning)
        import pynvml
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def detect_gpus() -> tuple[list[GpuInfo], str]:
    """(GPUs, why none were found) — the reason is empty when NVML answered."""
    try:
        pynvml = _nvml()
        pynvml.nvmlInit()
    except Exception as error:  # no library, no driver, no permission: all mean "no GPU here"
        return [], str(error) or error.__class__.__name__
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(GpuInfo(index, _text(pynvml.nvmlDeviceGetName(handle)), memory.total, memory.free))
        return gpus, ""
    except Exception as error:
        return [], str(error)
    finally:
        with suppress(Exception):
            pynvml.nvmlShutdown()


class NvmlSampler:
    """NVML opened once and read per call; ``sample()`` never raises.

    A failure (no library, no driver, the driver going away mid-run) is reported as
    the reason and NVML is opened again on a later call, at most every ``retry_s``.
    """

    def __init__(self, retry_s: float = 30.0):
        self.retry_s = retry_s
        self._pynvml = None
        self._handles: list = []
        self._names: list[str] = []
        self._next_try = 0.0
        self.reason = ""

    def _open(self, now: float) -> bool:
        if self._pynvml is not None:
            return True
        if now < self._next_try:
            return False
        self._next_try = now + self.retry_s
        try:
            pynvml = _nvml()
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            self._names = [_text(pynvml.nvmlDeviceGetName(h)) for h in self._handles]
        except Exception as error:
            self.reason = str(error) or error.__class__.__name__
            return False
        self._pynvml = pynvml
        self.reason = "" if self._handles else "NVML found no GPU"
        return True

    def close(self) -> None:
        if self._pynvml is not None:
            with suppress(Exception):
                self._pynvml.nvmlShutdown()
        self._pynvml = None
        self._handles = []

    def sample(self, now: float) -> tuple[list[GpuSample], str]:
        """(one sample per GPU, why there are none): the reason is empty when NVML answered."""
        if not self._open(now):
            return [], self.reason
        try:
            return [self._read(i, h) for i, h in enumerate(self._handles)], self.reason
        except Exception as error:  # the driver went away mid-run: report it, reopen later
            self.reason = str(error) or error.__class__.__name__
            self.close()
            return [], self.reason

    def _read(self, index: int, handle) -> GpuSample:
        nv = self._pynvml
        memory = nv.nvmlDeviceGetMemoryInfo(handle)  # the one figure we insist on
        gpu = GpuSample(index, self._names[index], int(memory.total), int(memory.used))

        def optional(read):
            try:
                return read()
            except nv.NVMLError:  # NotSupported on this board: leave the figure empty
                return None

        rates = optional(lambda: nv.nvmlDeviceGetUtilizationRates(handle))
        if rates is not None:
            gpu.utilization_pct, gpu.memory_utilization_pct = float(rates.gpu), float(rates.memory)
        gpu.temperature_c = optional(lambda: float(nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU)))
        gpu.power_w = optional(lambda: nv.nvmlDeviceGetPowerUsage(handle) / 1000)  # NVML says milliwatts
        gpu.power_limit_w = optional(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000)
        gpu.sm_clock_mhz = optional(lambda: float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM)))
        gpu.memory_clock_mhz = optional(lambda: float(nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM)))
        mask = optional(lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(handle))
        if mask is None:
            mask = optional(lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
        gpu.throttle_reasons = throttle_names(int(mask or 0))
        return gpu
