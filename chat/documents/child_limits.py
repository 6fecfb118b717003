"""What a child process that reads a hostile file sets on itself before it loads anything else:
CPU-time and memory limits, no core file; and the exit code it gives when it runs out of memory.
No Django: the upload check's child (``pdf.upload_check_worker``) loads PDFium and this only."""

from __future__ import annotations

import resource

MEMORY_EXIT = 3


def limit_resources(cpu_seconds: int, memory_mb: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file of a person's document
