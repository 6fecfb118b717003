"""One HTTP/1.1 exchange with llama-server, for ``http://`` and ``https://`` alike, over a
``Connection`` of its own (``Connection: close``, so no pool): the request written by h11, the
answer read by llhttp (``httptools``: Node.js's parser, sans-IO, in C), its body handed on as it
comes, on a frame clock.

Two maintained parsers, one for each direction: h11 writes and checks the request; llhttp reads
the answer (informational 1xx answers passed over, duplicate headers, chunked, Content-Length
and read-until-close bodies, protocol errors), since llama-server writes one chunk per token and
h11's reader runs its state machine for every chunk (figures: docs/llama-transport.md).

A streamed answer is the app's hot path: llama-server writes one event per token, and every
wake-up of the web process costs CPU the model needs on a small box. So a stream is read on
a clock:

- when nothing has come since the last read, it waits for the next bytes and hands them on
  at once, so the first token (and the first after a pause) is never later;
- once the caller says the answer has begun (``pace_from_now``: it saw answer text in what was
  handed on), it sleeps ``pace_s`` (one frame) after each hand-off: the bytes that arrive
  meanwhile wait in the kernel and come out in one read, so a fast stream costs one wake-up,
  one parse and one write per frame instead of per token. What comes before (prompt progress,
  the role chunk) starts no clock, so it never holds back the first token;
- the frame's sleep ends early when llama-server closes the connection (``Connection.pause``),
  so an answer's last tokens and its end are never held either.

The retry policy, the only one: a request whose connection was refused, or reset or closed
before any byte of its answer came (nothing of it ran), is sent once more after a short pause
(``send_once_more_if_nothing_ran``); a timeout or an answer that began is never retried.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

import h11
import httptools
from django.utils.translation import gettext_lazy as _

from monitor.llama.connection import Connection, tls_context
from monitor.llama.errors import LlamaHung, LlamaRejected, LlamaStreamBroken, LlamaUnavailable, rejection_from

CONNECT_TIMEOUT_S = 5.0  # the TCP connection and the TLS handshake
WRITE_TIMEOUT_S = 30.0  # the request written (llama-server busy taking connections, a large image)
MAX_HEAD_BYTES = 64 * 1024  # llama-server's status line and headers are a few hundred bytes
MAX_ERROR_BODY = 1024 * 1024  # an error answer kept for its message
RETRY_PAUSE_S = 0.1  # before a request that never reached the server is sent again

T = TypeVar("T")
StallCheck = Callable[[], Awaitable[bool]]


@dataclass(frozen=True)
class Upstream:
    """Where a llama-server listens: ``http://`` or ``https://``, host, port, a path prefix."""

    scheme: str
    host: str
    port: int
    prefix: str
    ca_file: str | None = None  # a CA to trust besides the system's (https only)

    @classmethod
    def parse(cls, base_url: str, ca_file: str | None = None) -> Upstream:
        parts = urlsplit(base_url)
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
        return cls(scheme, parts.hostname or "127.0.0.1", port, parts.path.rstrip("/"), ca_file or None)

    def tls(self) -> ssl.SSLContext | None:
        return tls_context(self.ca_file) if self.scheme == "https" else None


class _Unreadable(Exception):
    """A transfer coding other than chunked: a body we cannot read."""


class _NothingRan(Exception):
    """The connection was refused, or closed before any byte of the answer: nothing of the request ran."""


async def send_once_more_if_nothing_ran(attempt: Callable[[], Awaitable[T]]) -> T:
    """``attempt()``, and once more after a short pause if nothing of it ran (a router restarting, a
    connection the server dropped as the request came); then LlamaUnavailable.

    Every endpoint qwenweb calls changes nothing, nothing twice (loads, unloads) or costs only
    compute (completions, embeddings), so a request the server never began is safe to send again;
    a timeout or an answer that began is not retried (it may have run)."""
    try:
        return await attempt()
    except _NothingRan:
        await asyncio.sleep(RETRY_PAUSE_S)
    try:
        return await attempt()
    except _NothingRan as error:
        raise LlamaUnavailable() from error.__cause__


class Exchange:
    """One request: ``open()`` sends it and reads the answer's head; ``body()`` yields the body's bytes.

    ``body=None`` sends none (a GET); otherwise it is JSON. Waiting for bytes (the head, or the
    body between reads) gives up after ``timeout_s`` without any; with ``stall_s``, after each
    ``stall_s`` without any ``on_stall()`` is awaited instead: True waits another ``stall_s``, False
    (or no ``on_stall``) raises LlamaHung.
    """

    def __init__(
        self,
        upstream: Upstream,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
        *,
        timeout_s: float,
        stall_s: float | None = None,
        on_stall: StallCheck | None = None,
    ):
        self.upstream = upstream
        self.method = method
        self.target = upstream.prefix + target
        self.body_data = body
        self.headers = headers
        self.timeout_s = timeout_s
        self.stall_s = stall_s
        self.on_stall = on_stall
        self.status = 0
        self.conn: Connection | None = None
        self._paced = False
        self._reset()

    def _reset(self) -> None:
        """A fresh reading of the answer (each attempt's)."""
        self._parser = httptools.HttpResponseParser(self)
        self._received = 0  # bytes of the answer so far
        self._pieces: list[bytes] = []  # body bytes read, not yet handed on
        self._framed = False  # the body has a length or chunks: a close before its end is a cut
        self._informational = False
        self._ended = False
        self._fault: Exception | None = None  # bad framing, raised once the good bytes before it are handed on

    async def open(self) -> None:
        """Send the request and read the answer's head; an error status raises LlamaRejected."""
        try:
            await send_once_more_if_nothing_ran(self._attempt)
            if self.status >= 400:
                raise await self._rejection()
        except BaseException:
            self.close()
            raise

    async def _attempt(self) -> None:
        self.close()
        self._reset()
        await self._connect()
        try:
            async with asyncio.timeout(WRITE_TIMEOUT_S):
                await self.conn.send(self._request())
            await self._head()
        except ConnectionError as error:
            if self._received:
                raise LlamaUnavailable() from error
            raise _NothingRan() from error
        except (OSError, TimeoutError, httptools.HttpParserError, httptools.HttpParserUpgrade) as error:
            # No answer began (the request not taken in time, a head too long or garbled): the
            # server is not answering, which is not a broken answer.
            raise LlamaUnavailable() from error

    async def _connect(self) -> None:
        if self.upstream.scheme not in ("http", "https"):
            raise LlamaUnavailable(_("The model server's address must start with http:// or https://."))
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                self.conn = await Connection.open(self.upstream.host, self.upstream.port, self.upstream.tls())
        except ssl.SSLCertVerificationError as error:
            raise LlamaUnavailable(
                _("The model server's certificate is not trusted: %(reason)s.")
                % {"reason": error.verify_message or error.reason}
            ) from error
        except ConnectionError as error:  # refused, or reset during the TLS handshake
            raise _NothingRan() from error
        except (OSError, TimeoutError) as error:
            raise LlamaUnavailable() from error

    def _request(self) -> bytes:
        host = f"[{self.upstream.host}]" if ":" in self.upstream.host else self.upstream.host
        headers = [("Host", f"{host}:{self.upstream.port}"), *self.headers.items()]
        if self.body_data is not None:
            headers += [("Content-Type", "application/json"), ("Content-Length", str(len(self.body_data)))]
        headers.append(("Connection", "close"))
        writer = h11.Connection(h11.CLIENT)
        try:
            request = writer.send(h11.Request(method=self.method, target=self.target, headers=headers))
            if self.body_data:
                request += writer.send(h11.Data(data=self.body_data))
            return request + writer.send(h11.EndOfMessage())
        except h11.LocalProtocolError as error:  # a header h11 will not write (an API key with a newline)
            raise LlamaUnavailable() from error

    async def _head(self) -> None:
        """Read until the answer's head is whole (``status`` set); what came of the body after it is kept."""
        while not self.status:
            data = await self._wait()
            if not data:
                if not self._received:
                    raise _NothingRan() from ConnectionResetError("closed before answering")
                raise ConnectionAbortedError("closed in the middle of the answer's head")
            self._received += len(data)
            try:
                self._parser.feed_data(data)
            except httptools.HttpParserError as error:
                if not self.status:
                    raise
                self._fault = error  # in the body that came with the head: raised once the good bytes are handed on
            # Counted once fed: a large body (a batch of embeddings) may come in the same read as its head.
            if not self.status and self._received > MAX_HEAD_BYTES:
                raise httptools.HttpParserError("the answer's head is too long")

    # llhttp's callbacks (httptools), as it reads the answer.
    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"transfer-encoding":
            if value.strip().lower() != b"chunked":
                raise _Unreadable(value)  # llhttp would hand on the body still coded
            self._framed = True
        elif name == b"content-length":
            self._framed = True

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # informational (100 Continue, 103 Early Hints): the answer follows
            self._informational = True
            self._framed = False
        else:
            self.status = status

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
        else:
            self._ended = True

    async def _rejection(self) -> LlamaRejected:
        body = bytearray()
        try:
            async for data in self.body():
                body += data
                if len(body) > MAX_ERROR_BODY:
                    break
        except LlamaStreamBroken:
            pass  # the status says what matters; the message is what came of it
        return rejection_from(self.status, bytes(body))

    async def _wait(self) -> bytes:
        """The next bytes (``b""``: the connection's end), waited for as the class says."""
        if self.stall_s is None:
            return await self.conn.read(self.timeout_s)
        while True:
            try:
                return await self.conn.read(self.stall_s)
            except TimeoutError:
                if self.on_stall is None or not await self.on_stall():
                    raise LlamaHung() from None

    def pace_from_now(self) -> None:
        """The answer has begun (its text went out): from now on, one read per frame (``body``'s ``pace_s``)."""
        self._paced = True

    async def body(self, pace_s: float = 0.0) -> AsyncIterator[bytes]:
        """The body, as it arrives; once ``pace_from_now`` was called, at most one hand-off per ``pace_s``.

        Raises LlamaStreamBroken when the connection breaks or the framing is wrong before the
        body's end (after the good bytes before it are handed on); ends quietly at its end.
        """
        loop = asyncio.get_running_loop()
        read_at = loop.time()
        pieces = self._pieces
        try:
            while True:
                data = (pieces[0] if len(pieces) == 1 else b"".join(pieces)) if pieces else b""
                pieces.clear()
                if data:
                    yield data
                if self._fault is not None:
                    raise LlamaStreamBroken() from self._fault
                if self._ended:
                    return
                if data and self._paced and pace_s:
                    # One frame from the read, not from the hand-off's end.
                    wait = read_at + pace_s - loop.time()
                    if wait > 0:
                        await self.conn.pause(wait)
                received = self.conn.read_now()
                if received is None:
                    received = await self._wait()
                read_at = loop.time()
                if not received:  # the connection's end: the body's own end only when it had neither
                    if self._framed:  # a length nor chunks
                        raise LlamaStreamBroken()
                    self._ended = True
                    continue
                try:
                    self._parser.feed_data(received)
                except httptools.HttpParserError as error:
                    self._fault = error  # raised once the good bytes before it are handed on
        except (OSError, TimeoutError) as error:
            raise LlamaStreamBroken() from error

    def close(self) -> None:
        """Closing the connection is how llama-server learns to stop and free the slot."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        self._parser = None  # the parser refers to this exchange: no cycle left for the collector


async def fetch(exchange: Exchange, *, deadline_s: float | None = None) -> bytes:
    """A plain request's answer body, on a connection of its own (an error status raises LlamaRejected;
    an answer cut or stalled before its end, or not whole within ``deadline_s``, LlamaUnavailable, as
    for a server that did not answer). No pool: llama-server drops an idle kept connection after 5 s,
    and the app's small requests come seldom (docs/llama-transport.md)."""
    try:
        async with asyncio.timeout(deadline_s):
            await exchange.open()
            return b"".join([data async for data in exchange.body()])
    except (LlamaStreamBroken, TimeoutError) as error:
        raise LlamaUnavailable() from error
    finally:
        exchange.close()
