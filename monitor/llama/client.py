"""The one llama-server client: requests and streams over ``wire`` (``http://`` and ``https://``
alike), SSE parsing, errors as our own types.

Everything that talks to llama-server goes through ``LlamaClient``; it knows the base URL,
API key and CA file from settings, so no other module does. Each request has a connection of
its own (nothing is pooled, so nothing is bound to an event loop), and the one retry policy is
``wire``'s. ``local_client()`` is this node's own llama-server; ``client_at`` keeps one client per
address (a bounded cache, least recently used dropped first).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlencode

import orjson
from django.conf import settings

from monitor.llama import wire
from monitor.llama.errors import LlamaStreamBroken
from monitor.llama.sse import AnswerWatch, SSEParser, carries_answer


class LlamaClient:
    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        model: str | None = None,
        ca_file: str | None = None,
    ):
        self.base_url = (base_url or settings.LLAMA_SERVER_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else settings.LLAMA_API_KEY
        # In router mode every request names its model: POST bodies carry "model",
        # GET requests "?model=". None talks to a single-model server as is.
        self.model = model
        self._read_timeout = timeout or settings.LLAMA_REQUEST_TIMEOUT_S
        self._upstream = wire.Upstream.parse(self.base_url, settings.LLAMA_CA_FILE if ca_file is None else ca_file)
        self._headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict | None = None,
        json: dict | None = None,
        timeout_s: float | None = None,
    ) -> bytes:
        """The answer's body; an error status raises LlamaRejected. ``timeout_s``: the most the whole
        request may take (None: each wait for bytes may take the client's read timeout)."""
        if self.model is not None:
            if method == "GET":
                params = {**(params or {}), "model": self.model}
            elif json is not None:
                json = {**json, "model": self.model}
        target = path + "?" + urlencode(params) if params else path
        body = orjson.dumps(json) if json is not None else None
        return await wire.fetch(self._exchange(method, target, body), deadline_s=timeout_s)

    async def get_json(self, path: str, params: dict | None = None, *, timeout_s: float | None = None) -> Any:
        return orjson.loads(await self._request("GET", path, params=params, timeout_s=timeout_s))

    async def get_text(self, path: str, *, timeout_s: float | None = None) -> str:
        """A plain-text endpoint, e.g. ``/metrics`` (Prometheus text format)."""
        return (await self._request("GET", path, timeout_s=timeout_s)).decode("utf-8", errors="replace")

    async def post_json(self, path: str, payload: dict, *, timeout_s: float | None = None) -> Any:
        return orjson.loads(await self._request("POST", path, json=payload, timeout_s=timeout_s))

    async def post_raw(self, path: str, payload: dict, *, timeout_s: float | None = None) -> bytes:
        """POST an OpenAI-shaped request (model routed) and return llama-server's answer body untouched."""
        return await self._request("POST", path, json=payload, timeout_s=timeout_s)

    def _exchange(self, method: str, target: str, body: bytes | None, **stall: Any) -> wire.Exchange:
        return wire.Exchange(self._upstream, method, target, body, self._headers, timeout_s=self._read_timeout, **stall)

    def _streamed(self, path: str, payload: dict, stall_s: float | None, on_stall: wire.StallCheck | None):
        body = {**payload, "stream": True}
        if self.model is not None:
            body["model"] = self.model
        return self._exchange("POST", path, orjson.dumps(body), stall_s=stall_s, on_stall=on_stall)

    async def stream_raw(
        self,
        path: str,
        payload: dict,
        *,
        pace_s: float = 0.0,
        stall_s: float | None = None,
        on_stall: wire.StallCheck | None = None,
    ) -> AsyncIterator[bytes]:
        """POST a streamed request and yield llama-server's SSE bytes as they arrive, untouched.

        An error status raises LlamaRejected (with llama-server's body in ``payload``)
        before anything is yielded. Whether the stream reached ``[DONE]`` is the
        caller's to see; leaving early closes the connection and frees the slot.
        ``pace_s``: once the answer's text has begun, read at most once per that many seconds.
        ``stall_s``/``on_stall``: see ``wire.Exchange`` (LlamaHung when it gives up).
        """
        exchange = self._streamed(path, payload, stall_s, on_stall)
        watch = AnswerWatch() if pace_s else None
        try:
            await exchange.open()
            async with contextlib.aclosing(exchange.body(pace_s)) as body:
                async for data in body:
                    if watch is not None and watch.feed(data):
                        exchange.pace_from_now()
                        watch = None
                    yield data
        finally:
            exchange.close()

    async def stream_chat(
        self,
        payload: dict,
        *,
        pace_s: float = 0.0,
        stall_s: float | None = None,
        on_stall: wire.StallCheck | None = None,
    ) -> AsyncIterator[list[dict]]:
        """Yield the JSON chunks of a streamed ``/v1/chat/completions`` call, in batches.

        A batch is every complete event of one network read: one chunk while we
        keep up with llama-server, several when we fall behind, so a busy box
        forwards fewer, larger messages instead of queueing per-token work.
        Leaving the iteration early (break, cancellation) closes the upstream
        connection, which is how llama-server learns to free the slot. ``pace_s``: once the
        answer's text has begun, one read per that many seconds, so a batch is a frame's tokens.
        ``stall_s``/``on_stall``: see ``wire.Exchange`` (LlamaHung when it gives up).
        Connected, then cut (the server died, the network dropped): LlamaStreamBroken.
        """
        exchange = self._streamed("/v1/chat/completions", payload, stall_s, on_stall)
        parser = SSEParser()
        paced = not pace_s
        try:
            await exchange.open()
            async with contextlib.aclosing(exchange.body(pace_s)) as body:
                async for data in body:
                    batch, finished = parser.feed(data)
                    if batch:
                        if not paced and any(map(carries_answer, batch)):
                            exchange.pace_from_now()
                            paced = True
                        yield batch
                    if finished:
                        return
        finally:
            exchange.close()
        raise LlamaStreamBroken()

    # Router mode (llama-server started with --models-preset): one instance per profile.
    async def list_models(self, *, reload: bool = False, timeout_s: float | None = None) -> list[dict]:
        params = {"reload": "1"} if reload else None
        return orjson.loads(await self._request("GET", "/models", params=params, timeout_s=timeout_s))["data"]

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


# The kept clients, by (URL, key, model, CA file): the most recently used KEPT_CLIENTS of them.
KEPT_CLIENTS = 32
_kept: OrderedDict[tuple[str, str, str | None, str], LlamaClient] = OrderedDict()
_kept_lock = threading.Lock()


def client_at(base_url: str, api_key: str, model: str | None = None) -> LlamaClient:
    """The kept client for the llama-server at ``base_url`` with ``api_key``, naming ``model`` (or none).

    Kept per (URL, key, model, ``LLAMA_CA_FILE``), so a changed setting or node address is a new
    client; the least recently used is dropped once more than KEPT_CLIENTS are kept (a client holds
    no connection: one dropped while in use finishes its requests)."""
    key = (base_url.rstrip("/"), api_key, model, settings.LLAMA_CA_FILE)
    with _kept_lock:
        client = _kept.get(key)
        if client is None:
            client = _kept[key] = LlamaClient(base_url=key[0], api_key=api_key, model=model)
            if len(_kept) > KEPT_CLIENTS:
                _kept.popitem(last=False)
        else:
            _kept.move_to_end(key)
        return client


def local_client(model: str | None = None) -> LlamaClient:
    """This node's own llama-server (its router, for ``model``, or the router itself when None)."""
    return client_at(settings.LLAMA_SERVER_URL, settings.LLAMA_API_KEY, model)


T = TypeVar("T")


def run_with_client(work: Callable[[LlamaClient], Awaitable[T]], **client_options: Any) -> T:
    """Run ``work(client)`` to completion from synchronous code (a task, a thread, a form check), with
    this node's client, or one made with ``client_options``."""
    client = LlamaClient(**client_options) if client_options else local_client()
    return asyncio.run(work(client))
