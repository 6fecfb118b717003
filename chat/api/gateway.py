"""The OpenAI-compatible gateway: check a request, take the key's place and a turn in the fair queue,
relay llama-server's answer, count the usage. Streams are relayed as llama-server's own SSE bytes,
never decoded per token: a ``StreamTally`` only looks for the end marker and the last event with usage.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils.translation import gettext as _

from chat.accounts.quotas import AccountDisabled, QuotaExceeded, check_quota
from chat.api import keys, request_fields
from chat.api.errors import ApiError
from chat.api.keys import CallerKey
from chat.api.limits import KeyLimiter, OverLimit, TooManyRequests, get_limiter
from chat.queue import FairQueue, get_queue
from monitor.public import (
    LlamaClient,
    LlamaError,
    LlamaRejected,
    LlamaUnavailable,
    LoadFailed,
    ProfileUnavailable,
    ServerProfile,
    current_client,
    forget_serving_info,
    ready_client,
    serving_info,
    user_profiles,
)

# Our endpoint → llama-server's path.
ENDPOINTS = {
    "chat/completions": "/v1/chat/completions",
    "completions": "/v1/completions",
    "embeddings": "/v1/embeddings",
}
STREAMABLE = {"chat/completions", "completions"}
# OpenAI parameters llama-server does not do (it fails on them with a bare server error).
REFUSED_PARAMETERS = ("best_of", "suffix")


@dataclass
class ApiCall:
    endpoint: str
    body: dict
    client: LlamaClient
    stream: bool
    profile: str = ""
    server_profile: ServerProfile | None = None

    @property
    def path(self) -> str:
        return ENDPOINTS[self.endpoint]


async def admit(authorization: str | None, *, limiter: KeyLimiter | None = None) -> CallerKey:
    """The caller's key (401 when missing, wrong or revoked), counted against its requests per minute (429)."""
    key = await keys.authenticate(authorization)
    limit = settings.API_KEY_RPM
    try:
        await (limiter or get_limiter()).count_request(key.id, limit)
    except TooManyRequests as error:
        raise ApiError(
            429,
            _("This key made %(limit)d requests in the last minute, its limit. Try again in %(seconds)d seconds.")
            % {"limit": limit, "seconds": error.retry_after_s},
            type="requests",
            code="rate_limit_exceeded",
            retry_after_s=error.retry_after_s,
        ) from error
    return key


async def start_turn(key: CallerKey) -> None:
    """The owner's daily quotas, the same check as a chat turn's (429 named in OpenAI's shape); counts the turn."""
    try:
        await sync_to_async(check_quota)(key.owner_id)
    except QuotaExceeded as error:
        raise ApiError(429, str(error), type="insufficient_quota", code=error.code) from error
    except AccountDisabled as error:
        raise ApiError(401, str(error), code="account_disabled") from error


def _bad(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def parse_body(raw: bytes) -> dict:
    if len(raw) > settings.API_MAX_BODY_BYTES:
        raise _bad(
            _("The request is too large: the limit is %(mb)d MB.") % {"mb": settings.API_MAX_BODY_BYTES // 1_048_576},
            code="request_too_large",
        )
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise _bad(_("The request body is not valid JSON: %(why)s") % {"why": error}, code="invalid_json") from error
    if not isinstance(body, dict):
        raise _bad(_("The request body must be a JSON object."), code="invalid_json")
    return body


def check_parameters(endpoint: str, body: dict) -> None:
    """Refuse what the gateway does not pass on, naming the parameter."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _bad(_("Name a model in 'model': GET /v1/models lists them."), "model")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad(_("'stream' must be true or false."), "stream")
    if stream and endpoint not in STREAMABLE:
        raise _bad(_("This endpoint does not stream."), "stream")
    if "n" in body and body["n"] != 1:
        raise _bad(
            _("Unsupported parameter '%(name)s': one answer per request; send several requests instead.")
            % {"name": "n"},
            "n",
        )
    for name in REFUSED_PARAMETERS:
        if name in body:
            raise _bad(_("Unsupported parameter '%(name)s'.") % {"name": name}, name)
    if body.get("echo"):
        raise _bad(_("Unsupported parameter '%(name)s'.") % {"name": "echo"}, "echo")
    request_fields.check_request(endpoint, body)


def _not_found(model: str) -> ApiError:
    return ApiError(
        404,
        _("The model '%(model)s' does not exist or is not available: GET /v1/models lists them.")
        % {"model": model[:100]},
        code="model_not_found",
        param="model",
    )


async def prepare(endpoint: str, raw: bytes) -> ApiCall:
    """Parse and check a request and find the profile its ``model`` names (404 when none is available)."""
    body = parse_body(raw)
    check_parameters(endpoint, body)
    try:
        profile, client = await ready_client(body["model"], for_users=True)
    except LoadFailed as error:
        # The reason (paths, llama-server's log) is for admins, on the profile's page and timeline.
        message = _("The model '%(model)s' could not be loaded right now.") % {"model": body["model"][:100]}
        raise ApiError(503, message, type="server_error", code="model_not_loaded") from error
    except ProfileUnavailable as error:
        raise _not_found(body["model"]) from error
    except LlamaError as error:  # the local llama-server is down
        raise _from_llama(error) from error
    return ApiCall(
        endpoint=endpoint,
        body=body,
        client=client,
        stream=body.get("stream", False),
        profile=profile.name,
        server_profile=profile,
    )


def _unavailable() -> ApiError:
    return ApiError(503, _("The model server is not reachable right now."), type="server_error", code="unavailable")


def _broken() -> ApiError:
    return ApiError(
        502, _("The model server stopped in the middle of the answer."), type="server_error", code="stream_broken"
    )


def _from_llama(error: LlamaError) -> ApiError:
    if isinstance(error, LlamaRejected):
        return ApiError.from_upstream(error)
    if isinstance(error, LlamaUnavailable):
        forget_serving_info()
        return _unavailable()
    forget_serving_info()
    return _broken()


@asynccontextmanager
async def _turn(call: ApiCall, key: CallerKey, limiter: KeyLimiter, queue: FairQueue) -> AsyncIterator[None]:
    """The key's place (429 over its limit), then the owner's turn in the fair queue, shared with their chats."""
    async with AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(limiter.hold(key.id, key.concurrency_limit))
        except OverLimit as error:
            raise ApiError(
                429,
                _("This key already has %(limit)d requests in progress, its limit. Wait for one to finish.")
                % {"limit": key.concurrency_limit},
                type="requests",
                code="rate_limit_exceeded",
            ) from error
        try:
            capacity = (await serving_info(call.client)).total_slots
        except LlamaError as error:
            raise _from_llama(error) from error
        await stack.enter_async_context(queue.slot(str(key.owner_id), None, capacity, priority="person"))
        if call.server_profile is not None:
            call.client = await current_client(call.server_profile)  # a change may have gone live meanwhile
        yield


def usage_of(answer: dict) -> tuple[int, int]:
    """(prompt, output) tokens from an answer's ``usage``, else its llama.cpp ``timings``."""
    usage = answer.get("usage")
    if isinstance(usage, dict):
        return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    timings = answer.get("timings")
    if isinstance(timings, dict):
        prompt = int(timings.get("prompt_n") or 0) + int(timings.get("cache_n") or 0)
        return prompt, int(timings.get("predicted_n") or 0)
    return 0, 0


async def complete(
    call: ApiCall, key: CallerKey, *, limiter: KeyLimiter | None = None, queue: FairQueue | None = None
) -> bytes:
    """A non-streamed answer: llama-server's JSON body, relayed as is."""
    async with _turn(call, key, limiter or get_limiter(), queue or get_queue(call.profile or "llama")):
        prompt_tokens = completion_tokens = 0
        try:
            content = await call.client.post_raw(call.path, call.body)
            try:
                answer = orjson.loads(content)
                prompt_tokens, completion_tokens = usage_of(answer)
                if drop_cache_figures(answer):
                    content = orjson.dumps(answer)
            except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
                pass
        except LlamaError as error:
            raise _from_llama(error) from error
        finally:
            await asyncio.shield(keys.record_usage(key, prompt_tokens, completion_tokens))
    return content


def drop_cache_figures(answer: dict) -> bool:
    """Remove what tells how much of the prompt was already cached (another caller's prefix may be
    what was cached): llama-server's ``timings`` and ``tokens_cached``, and ``usage``'s
    ``cached_tokens``. True when something was removed."""
    removed = answer.pop("timings", None) is not None
    removed |= answer.pop("tokens_cached", None) is not None
    usage = answer.get("usage")
    if isinstance(usage, dict):
        removed |= usage.pop("prompt_tokens_details", None) is not None
    return removed


def without_cache_figures(event: bytes) -> bytes:
    """An SSE event with its ``data:`` JSON's cache figures removed (unchanged when it has none or is not JSON)."""
    lines = event.split(b"\n")
    for index, line in enumerate(lines):
        if line.startswith(b"data:"):
            try:
                chunk = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                continue
            if isinstance(chunk, dict) and drop_cache_figures(chunk):
                lines[index] = b"data: " + orjson.dumps(chunk)
    return b"\n".join(lines)


# What makes an event more than bytes to pass on: figures to strip and count, the end, an error.
# A model's text cannot forge them: inside a JSON string its quotes are escaped.
_MARKS = (b'"timings"', b'"usage"', b"[DONE]", b'"error"')


class StreamTally:
    """Watches relayed SSE bytes: whether ``[DONE]`` or an error event came, and the last event with figures.

    Only splits events and searches bytes; the events with figures (the last ones) are decoded
    and re-encoded without the cache figures (``drop_cache_figures``): the only per-event work
    is one search.
    """

    def __init__(self) -> None:
        self._partial = b""
        self._figures = b""
        self.events = 0
        self.finished = False  # [DONE] or an error event from llama-server

    def feed(self, data: bytes) -> bytes:
        """The whole events completed by ``data``, ready to relay (a partial event waits for its end)."""
        if not self._partial and data.endswith(b"\n\n") and not any(mark in data for mark in _MARKS):
            # The per-token read: whole events, nothing to rewrite or watch for. Relayed as it came.
            self.events += data.count(b"\n\n")
            return data
        *events, self._partial = (self._partial + data).split(b"\n\n")
        for index, event in enumerate(events):
            self.events += 1
            if b'"timings"' in event or b'"usage"' in event:
                self._figures = event
                events[index] = without_cache_figures(event)
            elif event.startswith(b"data: [DONE]") or event.startswith(b'data: {"error"'):
                self.finished = True
        return b"".join(event + b"\n\n" for event in events)

    def close(self) -> bytes:
        """The last event when the stream ended without its blank line."""
        return self.feed(b"\n\n") if self._partial.strip() else b""

    def usage(self) -> tuple[int, int]:
        """(prompt, output) tokens; when the stream was cut before its figures, output counts its events."""
        for line in self._figures.split(b"\n"):
            if line.startswith(b"data:"):
                try:
                    return usage_of(orjson.loads(line[5:]))
                except (orjson.JSONDecodeError, TypeError, ValueError):
                    break
        return 0, self.events


async def stream(
    call: ApiCall, key: CallerKey, *, limiter: KeyLimiter | None = None, queue: FairQueue | None = None
) -> AsyncIterator[bytes | None]:
    """A streamed answer. Yields ``None`` first, once llama-server has begun answering (anything
    that fails before that raises ApiError, for a plain error response), then its SSE bytes as
    they come. A failure after that ends the stream with an OpenAI-shaped error event.

    Closing the iteration early (the client went away) closes the upstream request, which
    frees llama-server's slot, and gives back the queue turn and the key's place.
    """
    tally = StreamTally()
    unrecorded = False
    try:
        async with _turn(call, key, limiter or get_limiter(), queue or get_queue(call.profile or "llama")):
            unrecorded = True
            upstream = call.client.stream_raw(call.path, call.body, pace_s=settings.API_FRAME_S)
            try:
                try:
                    data = await upstream.__anext__()
                except StopAsyncIteration:
                    raise _broken() from None
                except LlamaError as error:
                    raise _from_llama(error) from error
                yield None
                try:
                    while True:
                        relayed = tally.feed(data)
                        if tally.finished and unrecorded:
                            # Counted before the client sees the end, so a client that reads the
                            # usage right after the stream finds it.
                            unrecorded = False
                            await keys.record_usage(key, *tally.usage())
                        if relayed:
                            yield relayed
                        data = await upstream.__anext__()
                except StopAsyncIteration:
                    tail = tally.close()
                    if tail:
                        yield tail
                except LlamaError as error:
                    yield _from_llama(error).sse_event()  # a half event is dropped: it cannot be read
                    return
                if not tally.finished:
                    yield _broken().sse_event()
            finally:
                await upstream.aclose()
    finally:
        if unrecorded:
            await asyncio.shield(keys.record_usage(key, *tally.usage()))


async def list_models() -> dict:
    """The profiles people may use, as OpenAI's model list (id: the profile's name)."""
    rows = await sync_to_async(list)(user_profiles().values_list("name", "updated_at"))
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": int(updated.timestamp()), "owned_by": "qwenweb"}
            for name, updated in rows
        ],
    }


async def get_model(name: str) -> dict:
    for item in (await list_models())["data"]:
        if item["id"] == name:
            return item
    raise ApiError(
        404,
        _("The model '%(model)s' does not exist or is not available.") % {"model": name[:100]},
        code="model_not_found",
    )
