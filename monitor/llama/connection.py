"""One connection to llama-server: a non-blocking socket on the running event loop, TLS in memory
for ``https://``, and the frame clock's sleep.

The socket is read directly (no asyncio transport, no stream reader): a streamed answer is the
app's hot path, and every wake-up of the web process costs CPU the model needs on a small box.
TLS is sans-IO (``ssl.SSLContext.wrap_bio`` with two ``ssl.MemoryBIO``): the socket still carries
the bytes, so the frame clock's receive low-water mark (``pause``) works the same over TLS.
Everything read off the socket is decrypted at once, so the SSL object never holds readable
text between two reads; only a record's first part may wait in it for the rest.

Certificates are verified by default against the system's CA bundle, loaded only for an
``https://`` server, once per process (its cost: docs/performance.md); ``LLAMA_CA_FILE`` adds a CA
(a LAN server's self-signed certificate).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import socket
import ssl

READ_SIZE = 256 * 1024
# The receive low-water mark while a frame sleeps: far above the few hundred bytes a token's event is.
PACE_LOW_WATER = 64 * 1024


@functools.cache
def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Certificates and host names verified: the system's CAs, and ``ca_file``'s when one is named."""
    context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    return context


async def _addresses(host: str, port: int) -> list[tuple[int, tuple]]:
    """An IP address as it is (no thread hop for the resolver: the usual loopback or LAN address);
    a name through the loop's resolver, every address it gives, in its order."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return [(info[0], info[4]) for info in infos]
    return [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, (host, port))]


class Connection:
    """A connected socket; with ``tls``, an SSL object over it for ``host`` (None: plain HTTP).

    ``read``/``read_now`` give what came (decrypted), ``b""`` at the connection's end.
    """

    def __init__(self, sock: socket.socket, tls: ssl.SSLContext | None = None, host: str = ""):
        self.sock = sock
        self._tls: ssl.SSLObject | None = None
        if tls is not None:
            self._incoming, self._outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
            self._tls = tls.wrap_bio(self._incoming, self._outgoing, server_hostname=host)
        self._ended = False  # TLS: the end came with the last bytes handed on
        self._low_water = 1  # the socket's SO_RCVLOWAT; None: it cannot be set here
        self._watching: asyncio.AbstractEventLoop | None = None  # the loop watching the socket between frames
        self._waiter: asyncio.Future | None = None

    @classmethod
    async def open(cls, host: str, port: int, tls: ssl.SSLContext | None) -> Connection:
        """Connected (and the TLS handshake done); OSError (``ssl.SSLError`` among them) when not."""
        sock = await _connect(await _addresses(host, port))
        if tls is None:
            return cls(sock)
        connection = cls(sock, tls, host)
        try:
            await connection._handshake()
        except BaseException:
            connection.close()
            raise
        return connection

    async def _handshake(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                data = await loop.sock_recv(self.sock, READ_SIZE)
                if not data:
                    raise ConnectionResetError("closed during the TLS handshake") from None
                self._incoming.write(data)
        await self._flush()

    async def _flush(self) -> None:
        if self._outgoing.pending:
            await asyncio.get_running_loop().sock_sendall(self.sock, self._outgoing.read())

    async def send(self, data: bytes) -> None:
        if self._tls is None:
            await asyncio.get_running_loop().sock_sendall(self.sock, data)
            return
        self._tls.write(data)
        await self._flush()

    def read_now(self) -> bytes | None:
        """What has come already, without waiting: None when nothing (or only part of a TLS record)."""
        if self._ended:
            return b""
        try:
            data = self.sock.recv(READ_SIZE)
        except BlockingIOError:
            return None
        return data if self._tls is None else self._decrypt(data)

    async def read(self, timeout_s: float) -> bytes:
        """The next bytes, however long they take up to ``timeout_s`` without any (TimeoutError)."""
        if self._ended:
            return b""
        loop = asyncio.get_running_loop()
        self._unwatch()  # the loop's own reader waits now
        self._set_low_water(1)  # any byte wakes this wait (a frame's sleep sets it higher)
        while True:
            async with asyncio.timeout(timeout_s):
                data = await loop.sock_recv(self.sock, READ_SIZE)
            if self._tls is None:
                return data
            text = self._decrypt(data)
            if text is not None:
                return text

    def _decrypt(self, data: bytes) -> bytes | None:
        """The text in ``data`` and every whole record before it; None when none is whole yet."""
        if data:
            self._incoming.write(data)
        else:
            self._incoming.write_eof()
        parts = []
        try:
            while text := self._tls.read(READ_SIZE):
                parts.append(text)
            self._ended = True  # b"": the server's close_notify came
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            self._ended = True  # closed (cleanly or not): what came before it is handed on first
        if self._outgoing.pending:  # a TLS 1.3 key update's answer: a few bytes, into an idle send buffer
            with contextlib.suppress(BlockingIOError):
                self.sock.send(self._outgoing.read())
        if parts:
            return b"".join(parts)
        return b"" if self._ended else None

    async def pause(self, wait_s: float) -> None:
        """Sleep ``wait_s``, but wake at once when llama-server closes the connection (its end, or a
        failure): an answer's last bytes and its end are never held for the rest of a frame.

        While it sleeps the socket's receive low-water mark is set above what a frame brings, so the
        bytes that arrive do not wake the reader (that is the point of the frame), but the
        connection's end does: the kernel reports a closed or failed connection as readable
        whatever the mark. Over TLS the mark counts the encrypted bytes, and a close_notify alert
        is a few bytes: the connection's end (its FIN) is what wakes the sleep there too. The socket
        stays registered with the event loop from one frame to the next (a steady stream costs no
        extra system call per frame). Where the mark cannot be set, a plain sleep."""
        if not self._set_low_water(PACE_LOW_WATER):
            await asyncio.sleep(wait_s)
            return
        loop = asyncio.get_running_loop()
        if self._watching is None:
            loop.add_reader(self.sock.fileno(), self._on_readable)
            self._watching = loop
        self._waiter = loop.create_future()
        timer = loop.call_later(wait_s, self._wake)
        try:
            await self._waiter
        finally:
            timer.cancel()
            self._waiter = None

    def _on_readable(self) -> None:
        if self._waiter is not None:
            self._wake()
        else:  # readable while no frame sleeps (its end came during a hand-off): stop watching, or
            self._unwatch()  # the loop would call this again at every turn until the next frame

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _unwatch(self) -> None:
        if self._watching is not None:
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                self._watching.remove_reader(self.sock.fileno())
            self._watching = None

    def _set_low_water(self, level: int) -> bool:
        """Set SO_RCVLOWAT (kept between calls: set only when it changes); False where it cannot be."""
        if self._low_water == level:
            return True
        if self._low_water is None or not hasattr(socket, "SO_RCVLOWAT"):
            return False
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, level)
        except OSError:
            self._low_water = None  # not on this system: plain sleeps from now on
            return False
        self._low_water = level
        return True

    def close(self) -> None:
        """Closing the socket is how llama-server learns to stop and free the slot."""
        self._unwatch()
        with contextlib.suppress(OSError):
            self.sock.close()


async def _connect(addresses: list[tuple[int, tuple]]) -> socket.socket:
    """The first address that takes the connection (``localhost`` may name ::1 before 127.0.0.1)."""
    loop = asyncio.get_running_loop()
    error: OSError = OSError("no address")
    for family, address in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await loop.sock_connect(sock, address)
            return sock
        except BaseException as refused:
            sock.close()
            if not isinstance(refused, OSError):
                raise
            error = refused
    raise error
