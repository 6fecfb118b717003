"""The one llama-server client: requests and streams (``wire`` for http://, httpx for https://),
SSE parsing, errors as our own types.

Everything that talks to llama-server goes through ``LlamaClient``; it knows the
base URL and API key from settings, so no other module does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlencode

import httpx
import orjson
from django.conf import settings

from monitor.llama import wire
from monitor.llama.errors import LlamaStreamBroken, LlamaUnavailable, rejection_from
from monitor.llama.sse import SSEParser


class LlamaClient:
    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        model: str | None = None,
    ):
        self.base_url = (base_url or settings.LLAMA_SERVER_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else settings.LLAMA_API_KEY
        # In router mode every request names its model: POST bodies carry "model",
        # GET requests "?model=". None talks to a single-model server as is.
        self.model = model
        read_timeout = timeout or settings.LLAMA_REQUEST_TIMEOUT_S
        self._read_timeout = read_timeout
        self._timeout = httpx.Timeout(connect=5.0, read=read_timeout, write=30.0, pool=read_timeout)
        self._clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}

    def _client(self) -> httpx.AsyncClient:
        # httpx clients are bound to the loop that created them; keep one per loop.
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        for other in [other for other in self._clients if other.is_closed()]:
            del self._clients[other]  # a finished asyncio.run(): its client went with its loop
        if client is None or client.is_closed:
            # Only an https:// server gets here (plain http:// goes over ``wire``): certificates verified.
            headers = self._auth_headers()
            client = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=self._timeout)
            self._clients[loop] = client
        return client

    def _auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def aclose(self) -> None:
        for client in list(self._clients.values()):
            await client.aclose()
        self._clients.clear()

    def _routed(self, method: str, kwargs: dict) -> dict:
        if self.model is None:
            return kwargs
        if method == "GET":
            return {**kwargs, "params": {**kwargs.get("params", {}), "model": self.model}}
        if "json" in kwargs:
            return {**kwargs, "json": {**kwargs["json"], "model": self.model}}
        return kwargs

    async def _request(self, method: str, path: str, **kwargs: Any) -> bytes:
        """The answer's body; an error status raises LlamaRejected. ``http://`` servers are asked
        on a plain socket (``wire.fetch``), others through httpx."""
        kwargs = self._routed(method, kwargs)
        # Every endpoint qwenweb calls changes nothing, nothing twice (loads, unloads) or costs only
        # compute (completions, embeddings): a request whose connection broke before any answer
        # (a kept-alive one the server had just closed, a router restarting) is sent once more.
        if wire.supports(self.base_url):
            return await self._fetch(method, path, kwargs)
        retry = True
        while True:
            try:
                response = await self._client().request(method, path, **kwargs)
                break
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as error:
                if not retry:
                    raise LlamaUnavailable() from error
                retry = False
                await asyncio.sleep(0.1)
            except httpx.TransportError as error:
                raise LlamaUnavailable() from error
        if response.status_code >= 400:
            raise rejection_from(response.status_code, response.content)
        return response.content

    async def _fetch(self, method: str, path: str, kwargs: dict) -> bytes:
        if kwargs.get("params"):
            path += "?" + urlencode(kwargs["params"])
        body = orjson.dumps(kwargs["json"]) if "json" in kwargs else None
        headers = self._auth_headers()
        try:
            return await wire.fetch(self.base_url, method, path, body, headers, timeout_s=self._read_timeout)
        except LlamaUnavailable as error:  # refused (a router restarting): once more; a timeout is not retried
            if not isinstance(error.__cause__, ConnectionError):
                raise
        await asyncio.sleep(0.1)
        return await wire.fetch(self.base_url, method, path, body, headers, timeout_s=self._read_timeout)

    async def get_json(self, path: str, params: dict | None = None, *, timeout_s: float | None = None) -> Any:
        request = self._request("GET", path, **({"params": params} if params else {}))
        if timeout_s is None:
            return orjson.loads(await request)
        try:
            async with asyncio.timeout(timeout_s):
                return orjson.loads(await request)
        except TimeoutError as error:
            raise LlamaUnavailable() from error

    async def get_text(self, path: str) -> str:
        """A plain-text endpoint, e.g. ``/metrics`` (Prometheus text format)."""
        return (await self._request("GET", path)).decode("utf-8", errors="replace")

    async def post_json(self, path: str, payload: dict) -> Any:
        return orjson.loads(await self._request("POST", path, json=payload))

    async def post_raw(self, path: str, payload: dict) -> bytes:
        """POST an OpenAI-shaped request (model routed) and return llama-server's answer body untouched."""
        return await self._request("POST", path, json=payload)

    async def stream_raw(self, path: str, payload: dict, *, pace_s: float = 0.0) -> AsyncIterator[bytes]:
        """POST a streamed request and yield llama-server's SSE bytes as they arrive, untouched.

        An error status raises LlamaRejected (with llama-server's body in ``payload``)
        before anything is yielded. Whether the stream reached ``[DONE]`` is the
        caller's to see; leaving early closes the connection and frees the slot.
        ``pace_s``: read at most once per that many seconds while the stream flows (``wire``).
        """
        kwargs = self._routed("POST", {"json": {**payload, "stream": True}})
        async with contextlib.aclosing(self._stream_bytes(path, kwargs["json"], pace_s)) as chunks:
            async for data in chunks:
                yield data

    async def _stream_bytes(self, path: str, body: dict, pace_s: float) -> AsyncIterator[bytes]:
        """A streamed POST's body bytes: off the socket (``wire``) for http://, through httpx otherwise."""
        if wire.supports(self.base_url):
            headers = self._auth_headers()
            stream = wire.WireStream(self.base_url, path, orjson.dumps(body), headers, timeout_s=self._read_timeout)
            try:
                await stream.open()
                async for data in stream.body_bytes(pace_s):
                    yield data
            finally:
                stream.close()
            return
        try:
            async with self._open_stream(path, body) as response:
                async for data in response.aiter_raw():
                    yield data
        except (httpx.TransportError, httpx.StreamError) as error:
            raise LlamaStreamBroken() from error

    @contextlib.asynccontextmanager
    async def _open_stream(self, path: str, body: dict) -> AsyncIterator[httpx.Response]:
        """A streamed POST whose answer has begun: its status is read, and an error status raised.

        A kept-alive connection that the server closed just as we wrote on it breaks before
        any answer, so nothing of the request ran: it is sent once more, on a fresh connection.
        """
        async with contextlib.AsyncExitStack() as stack:
            for attempt in (1, 2):
                try:
                    response = await stack.enter_async_context(self._client().stream("POST", path, json=body))
                    break
                except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as error:
                    if attempt == 2:
                        raise LlamaUnavailable() from error
                    await asyncio.sleep(0.05)
                except httpx.TransportError as error:
                    raise LlamaUnavailable() from error
            if response.status_code >= 400:
                raise rejection_from(response.status_code, await response.aread())
            yield response

    async def props(self) -> dict:
        return await self.get_json("/props")

    async def slots(self) -> list[dict]:
        return await self.get_json("/slots")

    # Router mode (llama-server started with --models-preset): one instance per profile.
    async def list_models(self, *, reload: bool = False) -> list[dict]:
        params = {"reload": "1"} if reload else {}
        return orjson.loads(await self._request("GET", "/models", params=params))["data"]

    async def load_model(self, model_id: str) -> None:
        await self._request("POST", "/models/load", json={"model": model_id})

    async def unload_model(self, model_id: str) -> None:
        await self._request("POST", "/models/unload", json={"model": model_id})

    async def apply_template(self, messages: list[dict], **kwargs: Any) -> str:
        body = await self.post_json("/apply-template", {"messages": messages, **kwargs})
        return body["prompt"]

    async def count_tokens(self, text: str) -> int:
        body = await self.post_json("/tokenize", {"content": text, "add_special": True, "parse_special": True})
        return len(body["tokens"])

    async def stream_chat(self, payload: dict, *, pace_s: float = 0.0) -> AsyncIterator[list[dict]]:
        """Yield the JSON chunks of a streamed ``/v1/chat/completions`` call, in batches.

        A batch is every complete event of one network read: one chunk while we
        keep up with llama-server, several when we fall behind, so a busy box
        forwards fewer, larger messages instead of queueing per-token work.
        Leaving the iteration early (break, cancellation) closes the upstream
        connection, which is how llama-server learns to free the slot. ``pace_s``: one
        read per that many seconds while the stream flows, so a batch is a frame's tokens.
        Connected, then cut (the server died, the network dropped): LlamaStreamBroken.
        """
        body = {**payload, "stream": True}
        if self.model is not None:
            body["model"] = self.model
        parser = SSEParser()
        async with contextlib.aclosing(self._stream_bytes("/v1/chat/completions", body, pace_s)) as chunks:
            async for data in chunks:
                batch, finished = parser.feed(data)
                if batch:
                    yield batch
                if finished:
                    return
        raise LlamaStreamBroken()


_default_client: LlamaClient | None = None


def get_client() -> LlamaClient:
    """The process-wide client for the configured llama-server."""
    global _default_client
    if _default_client is None:
        _default_client = LlamaClient()
    return _default_client


T = TypeVar("T")


def run_with_client(work: Callable[[LlamaClient], Awaitable[T]], **client_options: Any) -> T:
    """Run ``work(client)`` to completion from synchronous code (a task, a thread, a form check).

    The client is made for this run and closed after it: an httpx client belongs to
    the event loop that made it, and ``asyncio.run`` makes a new loop each time.
    """

    async def main() -> T:
        client = LlamaClient(**client_options)
        try:
            return await work(client)
        finally:
            await client.aclose()

    return asyncio.run(main())
