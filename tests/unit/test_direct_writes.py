"""Twisted TCP writes sent at once (qwenweb/patches/direct_writes.py): every byte arrives, in order, also when
the kernel takes only part of a write and the rest waits in Twisted's buffer, and a close after
writing still delivers everything first. A real Twisted server (asyncio reactor, as Daphne runs it)
in its own process, a plain socket client."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

SERVER = textwrap.dedent(
    """
    import sys
    from twisted.internet import asyncioreactor
    asyncioreactor.install()
    from twisted.internet import protocol, reactor, tcp
    from qwenweb.patches import direct_writes
    direct_writes.PATCH.check()
    direct_writes.apply()

    class Talk(protocol.Protocol):
        def connectionMade(self):
            self.transport.write(b"one,")
            # Sent at once: nothing waits in Twisted's buffer for the reactor's next turn.
            print("buffered after the first write:", self.transport._tempDataLen, flush=True)
            self.transport.writeSequence([b"two,", b"three,"])
            self.transport.write(bytes(range(256)) * 40000)  # ~10 MB: more than the kernel takes at once
            self.transport.write(b",four")
            reactor.callLater(0.05, self.later)

        def later(self):
            self.transport.write(b",five")
            self.transport.loseConnection()

        def connectionLost(self, reason):
            reactor.stop()

    factory = protocol.Factory.forProtocol(Talk)
    port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    print(port.getHost().port, flush=True)
    reactor.run()
    """
)


def test_writes_arrive_whole_and_in_order_with_a_partial_send_and_a_close():
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            received = bytearray()
            while chunk := client.recv(65536):
                received += chunk
        expected = b"one,two,three," + bytes(range(256)) * 40000 + b",four,five"
        assert len(received) == len(expected)
        assert received == expected
        assert server.stdout.readline().strip() == "buffered after the first write: 0"
    finally:
        server.kill()
        server.wait()


def test_the_patch_replaces_twisteds_write():
    from twisted.internet import tcp

    from qwenweb.patches import direct_writes

    original = tcp.Connection.write
    try:
        direct_writes.apply()
        assert tcp.Connection.write is direct_writes.write
        assert direct_writes._buffered_write.__module__.startswith("twisted.")  # Twisted's own, never ours twice
    finally:
        tcp.Connection.write = original
