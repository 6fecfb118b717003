"""A download's bytes from the network to the disk: read, hashed and written at the same time."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

# One network read: larger blocks leave the CPU's caches between the read, the hash and the write, smaller
# ones cost more Python per byte (docs/performance.md, monitor/catalog/blocks.py).
CHUNK = 1 << 20
BUFFERS = 8  # reads in flight between the reader and the hashing and writing threads


class BlockPipeline:
    """Network reads handed to two threads at once, one hashing and one writing, so neither
    waits for the other nor for the network; through a few large buffers, reused (a fresh
    megabytes-long object per read costs the kernel its page faults and zeroing). A buffer
    is read into again once both threads are done with it."""

    def __init__(self, path: Path, mode: str, digest) -> None:
        self.free: queue.Queue = queue.Queue()
        for buffer in [bytearray(CHUNK) for _count in range(BUFFERS)]:
            self.free.put(buffer)
        self.failure: list = []
        self._queues = (queue.Queue(), queue.Queue())
        self._users: dict[int, int] = {}
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._hash, args=(digest,)),
            threading.Thread(target=self._write, args=(path, mode)),
        ]
        for thread in self._threads:
            thread.start()

    def put(self, buffer: bytearray, size: int) -> None:
        with self._lock:
            self._users[id(buffer)] = len(self._queues)
        for line in self._queues:
            line.put((buffer, size))

    def close(self) -> None:
        for line in self._queues:
            line.put(None)
        for thread in self._threads:
            thread.join()

    def _done(self, buffer: bytearray) -> None:
        with self._lock:
            self._users[id(buffer)] -= 1
            unused = not self._users[id(buffer)]
        if unused:
            self.free.put(buffer)

    def _hash(self, digest) -> None:
        while (item := self._queues[0].get()) is not None:
            with memoryview(item[0])[: item[1]] as block:
                digest.update(block)
            self._done(item[0])

    def _write(self, path: Path, mode: str) -> None:
        try:
            with path.open(mode) as out:
                while (item := self._queues[1].get()) is not None:
                    with memoryview(item[0])[: item[1]] as block:
                        out.write(block)
                    self._done(item[0])
        except OSError as error:
            self.failure.append(error)
            while (item := self._queues[1].get()) is not None:  # hand every buffer back: the reader never blocks
                self._done(item[0])
