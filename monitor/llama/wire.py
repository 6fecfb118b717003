"""llama-server's streamed answers, read straight off the socket and paced to a frame clock.

A streamed answer is the app's hot path: llama-server writes one event per token, and reading
each through httpx (anyio, httpcore, h11) and handing it on cost the web process about 0.5 ms
of CPU per token on a 2-core box, CPU taken from generation when the model's layers run on
the CPU. This reader keeps the one HTTP/1.1 request a stream needs (``Connection: close``,
so no pool) on a plain non-blocking socket and reads on a clock:

- when nothing has come since the last read, it waits for the next bytes and hands them on
  at once, so the first token (and the first after a pause) is never later;
- after each hand-off with text in it it sleeps ``pace_s`` (one frame): tokens that arrive
  meanwhile wait in the kernel and come out in one ``recv``, so a fast stream costs one
  wake-up, one parse and one write per frame instead of per token. Hand-offs without text
  (prompt progress, the role chunk) start no clock, so they never hold back the first token;
- the frame's sleep ends early when llama-server closes the stream (``_pace``), so an
  answer's last tokens and its end are never held either.

Plain requests (``fetch``: the router's model list, ``/metrics``, ``/slots``...) use the same code,
one request per connection. Only ``http://`` servers are read this way; ``LlamaClient`` keeps
httpx for ``https://``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

from monitor.llama.errors import LlamaStreamBroken, LlamaUnavailable, rejection_from

READ_SIZE = 256 * 1024
WRITE_TIMEOUT_S = 30.0  # the request written (llama-server busy taking connections, a large image)
MAX_HEAD_BYTES = 64 * 1024  # llama-server's status line and headers are a few hundred bytes
MAX_ERROR_BODY = 1024 * 1024  # an error answer kept for its message
MAX_CHUNK_LINE = 1024  # a chunk-size line: hex digits and perhaps extensions
# The receive low-water mark while a frame sleeps: far above the few hundred bytes a token's event is.
PACE_LOW_WATER = 64 * 1024
# Answer text in an OpenAI-shaped event ("content" or "reasoning_content" with a string value);
# the model's own quotes inside a string are escaped, so its text cannot make this up.
TEXT_MARK = b'content":"'


class _Reset(Exception):
    """The connection closed before any answer: nothing of the request ran."""


async def _addresses(host: str, port: int) -> list[tuple[int, tuple]]:
    """An IP address as it is (no thread hop for the resolver: the usual loopback or LAN address);
    a name through the loop's resolver, every address it gives, in its order."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return [(info[0], info[4]) for info in infos]
    return [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, (host, port))]


def supports(base_url: str) -> bool:
    return urlsplit(base_url).scheme.lower() == "http"


class WireStream:
    """One request: ``open()`` sends it and reads the head; ``body_bytes()`` yields the body's bytes.
    A POST's body is JSON; ``body=None`` sends none (a GET)."""

    def __init__(
        self,
        base_url: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
        *,
        timeout_s: float,
        method: str = "POST",
    ):
        parts = urlsplit(base_url)
        self.method = method
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.path = path
        self.body = body
        self.headers = headers
        self.timeout_s = timeout_s
        self.sock: socket.socket | None = None
        self._buffer = bytearray()
        self._chunked = False
        self._remaining: int | None = None  # Content-Length left, when not chunked
        self._chunk_left = 0  # bytes of the current chunk still to come
        self._done = False
        self._broken = False
        self._low_water = 1  # the socket's SO_RCVLOWAT; None: it cannot be set here
        self._watching: asyncio.AbstractEventLoop | None = None  # the loop watching the socket between frames
        self._waiter: asyncio.Future | None = None

    async def open(self, connect_timeout_s: float = 5.0) -> None:
        """Send the request and read the answer's head; an error status raises LlamaRejected."""
        for attempt in (1, 2):
            try:
                await self._open(connect_timeout_s)
                return
            except _Reset:
                self.close()
                self._buffer.clear()
                if attempt == 2:
                    raise LlamaUnavailable() from None
                await asyncio.sleep(0.05)

    async def _open(self, connect_timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(connect_timeout_s):
                await self._connect(await _addresses(self.host, self.port))
        except (OSError, TimeoutError) as error:
            self.close()
            raise LlamaUnavailable() from error
        host = f"[{self.host}]" if ":" in self.host else self.host
        head = [f"{self.method} {self.prefix}{self.path} HTTP/1.1", f"Host: {host}:{self.port}"]
        head += [f"{name}: {value}" for name, value in self.headers.items()]
        if self.body is not None:
            head += ["Content-Type: application/json", f"Content-Length: {len(self.body)}"]
        head.append("Connection: close")
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (self.body or b"")
                await loop.sock_sendall(self.sock, request)
            status, headers = await self._read_head()
        except (ConnectionError, BrokenPipeError) as error:
            raise _Reset() from error
        except (OSError, TimeoutError, LlamaStreamBroken) as error:
            # No answer began (the request not taken in time, a head too long or garbled): the
            # server is not answering, which is not a broken answer.
            raise LlamaUnavailable() from error
        encoding = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in encoding
        if not self._chunked and "content-length" in headers:
            try:
                self._remaining = int(headers["content-length"])
            except ValueError:
                raise LlamaUnavailable() from None
            if self._remaining < 0:
                raise LlamaUnavailable()
            self._done = self._remaining == 0
        if status >= 400:
            body = bytearray()
            async for data in self.body_bytes(pace_s=0):
                body += data
                if len(body) > MAX_ERROR_BODY:
                    break
            self.close()
            raise rejection_from(status, bytes(body))

    async def _connect(self, addresses: list[tuple[int, tuple]]) -> None:
        """The first address that takes the connection (``localhost`` may name ::1 before 127.0.0.1)."""
        loop = asyncio.get_running_loop()
        error: OSError = OSError("no address")
        for family, address in addresses:
            self.close()
            self.sock = socket.socket(family, socket.SOCK_STREAM)
            self.sock.setblocking(False)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                await loop.sock_connect(self.sock, address)
                return
            except OSError as refused:
                error = refused
        raise error

    async def _read_head(self) -> tuple[int, dict[str, str]]:
        while b"\r\n\r\n" not in self._buffer:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise LlamaStreamBroken()
            data = await self._recv_wait()
            if not data:
                raise _Reset()
            self._buffer += data
        end = self._buffer.index(b"\r\n\r\n")
        lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        del self._buffer[: end + 4]
        try:
            _version, code, *_reason = lines[0].split(" ", 2)
            status = int(code)
        except ValueError:
            raise LlamaStreamBroken() from None
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def _recv_wait(self) -> bytes:
        """The next bytes, however long they take (up to the read timeout)."""
        loop = asyncio.get_running_loop()
        self._unwatch()  # the loop's own reader waits now
        self._set_low_water(1)  # any byte wakes this wait (a frame's sleep sets it higher)
        try:
            async with asyncio.timeout(self.timeout_s):
                return await loop.sock_recv(self.sock, READ_SIZE)
        except TimeoutError:
            raise LlamaStreamBroken() from None

    async def _pace(self, wait_s: float) -> None:
        """Sleep ``wait_s``, but wake at once when llama-server closes the stream (its end, or a
        failure): the answer's last tokens and its end are never held for the rest of a frame.

        While it sleeps the socket's receive low-water mark is set above what a frame brings, so the
        tokens that arrive do not wake the reader (that is the point of the frame), but the
        connection's end does: the kernel reports a closed or failed connection as readable
        whatever the mark. The socket stays registered with the event loop from one frame to the
        next (a steady stream costs no extra system call per frame). Where the mark cannot be
        set, a plain sleep."""
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

    def _recv_now(self) -> bytes | None:
        """What the kernel holds already, without waiting: None when nothing came."""
        try:
            return self.sock.recv(READ_SIZE)
        except BlockingIOError:
            return None

    async def body_bytes(self, pace_s: float) -> AsyncIterator[bytes]:
        """The body, de-chunked, as it arrives; at most one hand-off per ``pace_s`` while it streams.

        Raises LlamaStreamBroken when the connection breaks or the framing is wrong before the
        body's end; ends quietly at its end.
        """
        try:
            if self._buffer:  # what came with the head
                data, self._buffer = bytes(self._buffer), bytearray()
                out = self._take(data)
                if out:
                    yield out
                if self._broken:
                    raise LlamaStreamBroken()
            loop = asyncio.get_running_loop()
            while not self._done:
                data = self._recv_now()
                if data is None:
                    data = await self._recv_wait()
                read_at = loop.time()
                if not data:
                    if self._chunked or self._remaining:
                        raise LlamaStreamBroken()
                    return  # read until close: the close is the end
                out = self._take(data)
                if out:
                    yield out
                if self._broken:
                    raise LlamaStreamBroken()
                if pace_s and not self._done and TEXT_MARK in out:
                    # The clock starts with text: prompt progress and the role chunk before the first
                    # token do not hold it back. One frame from this read, not from the hand-off's end.
                    wait = read_at + pace_s - loop.time()
                    if wait > 0:
                        await self._pace(wait)
        except OSError as error:
            raise LlamaStreamBroken() from error

    def _take(self, data: bytes) -> bytes:
        """The body bytes in ``data`` (chunk framing removed); marks the end when it comes. Bad
        framing raises LlamaStreamBroken, after the good bytes before it are handed on."""
        if self._broken:
            raise LlamaStreamBroken()
        if not self._chunked:
            if self._remaining is not None:
                data = data[: self._remaining]
                self._remaining -= len(data)
                self._done = self._remaining <= 0
            return data
        if self._chunk_left >= len(data) + 2 and not self._buffer:
            # The common case mid-chunk: all of it is body (the chunk's CRLF is still to come).
            self._chunk_left -= len(data)
            return data
        self._buffer += data
        out = bytearray()
        try:
            self._dechunk(out)
        except LlamaStreamBroken:
            if not out:
                raise
            self._broken = True  # raised on the next read, once ``out`` is handed on
            self._done = False
        return bytes(out)

    def _dechunk(self, out: bytearray) -> None:
        while self._buffer:
            if self._chunk_left:
                if self._chunk_left > 2:
                    piece = self._buffer[: self._chunk_left - 2]
                    out += piece
                    del self._buffer[: len(piece)]
                    self._chunk_left -= len(piece)
                    if self._chunk_left > 2:
                        break
                if len(self._buffer) < 2:
                    break
                if self._buffer[:2] != b"\r\n":
                    raise LlamaStreamBroken()
                del self._buffer[:2]
                self._chunk_left = 0
                continue
            end = self._buffer.find(b"\r\n")
            if end < 0:
                if len(self._buffer) > MAX_CHUNK_LINE:
                    raise LlamaStreamBroken()
                break
            line = bytes(self._buffer[:end]).split(b";", 1)[0].strip()
            try:
                size = int(line, 16)
            except ValueError:
                raise LlamaStreamBroken() from None
            if size < 0:
                raise LlamaStreamBroken()
            del self._buffer[: end + 2]
            if size == 0:  # the last chunk: trailers, if any, are not read
                self._done = True
                self._buffer.clear()
                break
            self._chunk_left = size + 2  # the chunk and its CRLF

    def close(self) -> None:
        """Closing the socket is how llama-server learns to stop and free the slot."""
        if self.sock is not None:
            self._unwatch()
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None


async def fetch(
    base_url: str, method: str, path: str, body: bytes | None, headers: dict[str, str], *, timeout_s: float
) -> bytes:
    """One plain request's answer body, on a connection of its own (an error status raises LlamaRejected;
    an answer cut or stalled before its end, LlamaUnavailable, as for a server that did not answer).

    The small requests every part of the app makes (the router's ``/models``, ``/metrics``,
    ``/slots``) cost about 0.2 ms of CPU this way against 1-3 ms through httpx's pool, whose kept
    connections llama-server drops after 5 idle seconds: the watchdog asks every 15 s, the sampler
    every 10 s while no dashboard is open, the gateway before each answer."""
    stream = WireStream(base_url, path, body, headers, timeout_s=timeout_s, method=method)
    try:
        await stream.open()
        return b"".join([data async for data in stream.body_bytes(pace_s=0)])
    except LlamaStreamBroken as error:
        raise LlamaUnavailable() from error
    finally:
        stream.close()
