"""Twisted's TCP writes sent at once when nothing waits before them, as asyncio's transports do.

Twisted buffers every write and sends it on the reactor's next turn, once the socket reports
writable: per streamed frame that is an extra event-loop turn, two selector changes (add and
remove the writer) and a dozen Python calls in the web process, CPU a small box takes from
generation. Here a write to a connection with nothing buffered goes to the socket straight away;
what the kernel does not take (a full send buffer), and every write while something is buffered,
takes Twisted's own path, so order, back-pressure (producers) and error handling stay Twisted's.
TLS connections are left as they are. Twisted has no setting for this.

Gain, bench/patches_bench.py (the runs in docs/performance.md): 44-63 µs less of the web process's
CPU per WebSocket frame, 35-58 µs less per server-sent event (the gateway's stream).
"""

from __future__ import annotations

from twisted.internet import tcp

from qwenweb.patches.guard import Patch

PATCH = Patch(
    "direct_writes",
    versions={"twisted": "26.10.0"},
    touches={
        "twisted": (
            "twisted.internet.tcp:Connection.write",
            "twisted.internet.tcp:Connection.writeSequence",
            "twisted.internet.tcp:Connection.writeSomeData",
            "twisted.internet.tcp:Connection.TLS",
            "twisted.internet.tcp:Connection.connected",
            "twisted.internet.tcp:Connection.disconnecting",
            "twisted.internet.tcp:Connection._writeDisconnected",
            "twisted.internet.tcp:Connection._aborting",
            "twisted.internet.tcp:Connection.producer",
            "twisted.internet.tcp:Connection.streamingProducer",
            "twisted.internet.tcp:Connection.offset",
            "twisted.internet.tcp:Connection.dataBuffer",
            "twisted.internet.tcp:Connection.__init__>socket",
            "twisted.internet.abstract:FileDescriptor.__init__>_tempDataLen",
        )
    },
)

_buffered_write = tcp.Connection.write
_buffered_write_sequence = tcp.Connection.writeSequence


def write(self, data: bytes) -> None:
    if (
        not data
        or self.TLS
        or not self.connected
        or self._writeDisconnected
        or self.disconnecting
        or self._aborting
        or (self.producer is not None and not self.streamingProducer)  # a pull producer: doWrite asks it
        or type(self).writeSomeData is not tcp.Connection.writeSomeData  # e.g. UNIX sockets passing fds
        or self._tempDataLen
        or self.offset < len(self.dataBuffer)
    ):
        _buffered_write(self, data)
        return
    try:
        sent = self.socket.send(data)
    except BlockingIOError:
        sent = 0
    except OSError:
        sent = 0  # Twisted's path meets the same error when it writes, and closes as it always does
    if sent < len(data):
        _buffered_write(self, bytes(memoryview(data)[sent:]))


def write_sequence(self, iovec) -> None:
    if self.TLS:
        _buffered_write_sequence(self, iovec)
    else:
        write(self, b"".join(iovec))


def apply() -> None:
    tcp.Connection.write = write
    tcp.Connection.writeSequence = write_sequence
