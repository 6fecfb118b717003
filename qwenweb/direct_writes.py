"""Twisted's TCP writes sent at once when nothing waits before them, as asyncio's transports do.

Twisted buffers every write and sends it on the reactor's next turn, once the socket reports
writable: per streamed frame that is an extra event-loop turn, two selector changes (add and
remove the writer) and a dozen Python calls in the web process, which is CPU a small box takes
from generation (bench/cpu_bench.py). Here a write to a connection with nothing buffered goes to
the socket straight away; what the kernel does not take (a full send buffer), and every write
while something is buffered, takes Twisted's own path, so order, back-pressure (producers) and
error handling stay Twisted's. TLS connections are left as they are.
"""

from __future__ import annotations

from twisted.internet import tcp

_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    buffered_write = tcp.Connection.write
    buffered_write_sequence = tcp.Connection.writeSequence

    def write(self, data: bytes) -> None:
        if (
            not data
            or getattr(self, "TLS", False)
            or not self.connected
            or self._writeDisconnected
            or self.disconnecting
            or getattr(self, "_aborting", False)
            or (self.producer is not None and not self.streamingProducer)  # a pull producer: doWrite asks it
            or type(self).writeSomeData is not tcp.Connection.writeSomeData  # e.g. UNIX sockets passing fds
            or self._tempDataLen
            or self.offset < len(self.dataBuffer)
        ):
            buffered_write(self, data)
            return
        try:
            sent = self.socket.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            sent = 0  # Twisted's path meets the same error when it writes, and closes as it always does
        if sent < len(data):
            buffered_write(self, bytes(memoryview(data)[sent:]))

    def write_sequence(self, iovec) -> None:
        if getattr(self, "TLS", False):
            buffered_write_sequence(self, iovec)
        else:
            write(self, b"".join(iovec))

    tcp.Connection.write = write
    tcp.Connection.writeSequence = write_sequence
