"""The HTTP under one MCP call: to the staff-entered origin only, at one checked address, no redirect
followed, no more bytes read than the cap.

One `PinnedTransport` serves one call (a listing or a tool call: its handshake, its requests, the
session's end). It is the `httpx2` transport of the client the MCP SDK's Streamable HTTP transport is
given, so every request the SDK makes goes through these checks. What it refused is kept in `refusal`
(the SDK turns transport errors into its own, less telling ones); the client reads it first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

from chat.tools.mcp.addresses import Endpoint, address_for_call
from chat.tools.mcp.errors import McpError


class Refused(httpx2.ReadError):
    """A response this transport will not pass on (its reason is the transport's `refusal`)."""


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, transport: PinnedTransport) -> None:
        self._inner = inner
        self._transport = transport

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._transport.bytes_read += len(chunk)
            if self._transport.bytes_read > self._transport.max_bytes:
                self._transport.refusal = self._transport.refusal or "too_large"
                raise Refused("the server's answer is over the limit")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class PinnedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, endpoint: Endpoint, pinned: list[str], *, max_bytes: int) -> None:
        self.endpoint = endpoint
        self.pinned = pinned
        self.max_bytes = max_bytes
        self.bytes_read = 0
        self.refusal = ""  # "", "address", "redirect", "origin" or "too_large"
        self.address_error: McpError | None = None
        self.error_status = 0  # the last HTTP error status the server answered
        self._address: str | None = None
        # No proxy from the environment, no retries: the request goes where staff said, once.
        self._inner = httpx2.AsyncHTTPTransport(trust_env=False)

    async def _connect_to(self) -> str:
        if self._address is None:
            try:
                self._address = await address_for_call(self.endpoint, self.pinned)
            except McpError as error:
                self.refusal, self.address_error = "address", error
                raise Refused(str(error)) from error
        return self._address

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80)) != (
            self.endpoint.scheme,
            self.endpoint.host,
            self.endpoint.port,
        ):
            self.refusal = "origin"
            raise Refused("a request to another origin than the server's")
        address = await self._connect_to()
        # The Host header stays the name staff typed; TLS checks the certificate against that name too.
        request.url = url.copy_with(host=address)
        if url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": self.endpoint.host}
        response = await self._inner.handle_async_request(request)
        if 300 <= response.status_code < 400:
            await response.aclose()
            self.refusal = "redirect"
            raise Refused("the server answered with a redirect")
        if response.status_code >= 400:
            self.error_status = response.status_code
        response.stream = _CappedStream(response.stream, self)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
