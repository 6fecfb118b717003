"""The OpenAI-compatible gateway: check a request, take the key's place and a turn in the fair queue,
relay llama-server's answer, count the usage. Streams are relayed as llama-server's own SSE bytes,
never decoded per token: a ``StreamTally`` (``chat.api.relay``) only looks for the end marker and
the last event with usage.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.accounts.quotas import AccountDisabled, QuotaExceeded, check_quota
from chat.api import keys, request_fields
from chat.api.errors import ApiError
from chat.api.keys import CallerKey
from chat.api.limits import KeyLimiter, OverLimit, TooManyRequests, get_limiter
from chat.api.relay import StreamTally, drop_cache_figures, timings_of, usage_of
from monitor.public import (
    LlamaError,
    LlamaRejected,
    LlamaUnavailable,
    LoadFailed,
    ProfileUnavailable,
    QueueUnavailable,
    ServerProfile,
    ServingPool,
    ServingSlot,
    find_profile,
    serving_pool,
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
    pool: ServingPool
    stream: bool

    @property
    def path(self) -> str:
        return ENDPOINTS[self.endpoint]

    @property
    def profile(self) -> str:
        return self.pool.profile.name

    def affinity(self) -> tuple[str, str]:
        """(the conversation this call continues, the one it makes): an agent sends the whole
        conversation again each turn, so the call before this one sent every message up to the last
        assistant message; this call's own messages name what the next one continues."""
        messages = self.body.get("messages")
        if self.endpoint != "chat/completions" or not isinstance(messages, list):
            return "", ""
        roles = [message.get("role") if isinstance(message, dict) else None for message in messages]
        last_answer = max((index for index, role in enumerate(roles) if role == "assistant"), default=-1)
        before = _conversation_key(self.profile, messages[:last_answer]) if last_answer > 0 else ""
        return before, _conversation_key(self.profile, messages)


def _conversation_key(profile: str, messages: list) -> str:
    digest = hashlib.sha256(orjson.dumps([profile, messages], option=orjson.OPT_SORT_KEYS)).hexdigest()
    return "api:" + digest[:32]


async def admit(authorization: str | None, *, limiter: KeyLimiter | None = None) -> CallerKey:
    """The caller's key (401 when missing, wrong or revoked), counted against its requests per minute
    (429), in one hop to a database thread."""
    return await sync_to_async(_admit)(keys.bearer_key(authorization), limiter or get_limiter())


def _admit(bearer_key: str, limiter: KeyLimiter) -> CallerKey:
    key = keys.caller_of(bearer_key)
    limit = settings.API_KEY_RPM
    try:
        limiter.count_request(key.id, limit)
    except TooManyRequests as error:
        raise ApiError(
            429,
            ngettext(
                "This key made %(limit)d request in the last minute, its limit. Try again in %(seconds)d s.",
                "This key made %(limit)d requests in the last minute, its limit. Try again in %(seconds)d s.",
                limit,
            )
            % {"limit": limit, "seconds": error.retry_after_s},
            type="requests",
            code="rate_limit_exceeded",
            retry_after_s=error.retry_after_s,
        ) from error
    return key


async def open_call(
    authorization: str | None, endpoint: str, read_body: Callable[[], bytes], *, limiter: KeyLimiter | None = None
) -> tuple[CallerKey, ApiCall]:
    """A completion's key admitted (``admit``), its owner's daily quotas counted (429 named in
    OpenAI's shape, before any model is loaded for someone over them), the request parsed and
    checked (400) and the profile its ``model`` names found (404), in one hop to a database thread;
    then that profile loaded when it is not (503 when it cannot be). ``read_body`` gives the
    request's body: read only for a caller who passed the key, rate and quota checks."""
    key, body, profile = await sync_to_async(_open_call)(
        keys.bearer_key(authorization), endpoint, read_body, limiter or get_limiter()
    )
    return key, await _ready_call(endpoint, body, profile)


def _open_call(
    bearer_key: str, endpoint: str, read_body: Callable[[], bytes], limiter: KeyLimiter
) -> tuple[CallerKey, dict, ServerProfile]:
    key = _admit(bearer_key, limiter)
    try:
        with transaction.atomic():  # the quota's reads and writes in one transaction (one commit)
            check_quota(key.owner_id)
    except QuotaExceeded as error:
        raise ApiError(429, str(error), type="insufficient_quota", code=error.code) from error
    except AccountDisabled as error:
        raise ApiError(401, str(error), code="account_disabled") from error
    body = parse_body(read_body())
    check_parameters(endpoint, body)
    try:
        return key, body, find_profile(body["model"], for_users=True)
    except ProfileUnavailable as error:
        raise _not_found(body["model"]) from error


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


async def _ready_call(endpoint: str, body: dict, profile: ServerProfile) -> ApiCall:
    """The call for a checked request, its profile loaded first when no node serves it."""
    try:
        pool = await serving_pool(profile)
    except LoadFailed as error:
        # The reason (paths, llama-server's log) is for admins, on the profile's page and timeline.
        message = _("The model '%(model)s' could not be loaded right now.") % {"model": body["model"][:100]}
        raise ApiError(503, message, type="server_error", code="model_not_loaded") from error
    except LlamaError as error:  # its server is down
        raise _from_llama(error) from error
    return ApiCall(endpoint=endpoint, body=body, pool=pool, stream=body.get("stream", False))


def _unavailable() -> ApiError:
    return ApiError(503, _("The model server is not reachable right now."), type="server_error", code="unavailable")


def _broken() -> ApiError:
    return ApiError(
        502, _("The model server stopped in the middle of the answer."), type="server_error", code="stream_broken"
    )


def _from_llama(error: LlamaError | QueueUnavailable) -> ApiError:
    if isinstance(error, LlamaRejected):
        return ApiError.from_upstream(error)
    if isinstance(error, LlamaUnavailable):
        return _unavailable()
    if isinstance(error, QueueUnavailable):
        return ApiError(503, str(error), type="server_error", code="unavailable")
    return _broken()


@asynccontextmanager
async def _turn(call: ApiCall, key: CallerKey, limiter: KeyLimiter) -> AsyncIterator[ServingSlot]:
    """The key's place (429 over its limit), then the owner's serving slot, in line with their chats."""
    async with AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(limiter.hold(key.id, key.concurrency_limit))
        except OverLimit as error:
            raise ApiError(
                429,
                ngettext(
                    "This key already has %(limit)d request in progress, its limit. Wait for it to finish.",
                    "This key already has %(limit)d requests in progress, its limit. Wait for one to finish.",
                    key.concurrency_limit,
                )
                % {"limit": key.concurrency_limit},
                type="requests",
                code="rate_limit_exceeded",
            ) from error
        continues, makes = call.affinity()
        try:
            slot = await stack.enter_async_context(
                call.pool.slot(str(key.owner_id), priority="person", affinity=continues, remember_as=makes)
            )
        except QueueUnavailable as error:
            raise _from_llama(error) from error
        yield slot


async def complete(call: ApiCall, key: CallerKey, *, limiter: KeyLimiter | None = None) -> bytes:
    """A non-streamed answer: llama-server's JSON body, relayed as is."""
    async with _turn(call, key, limiter or get_limiter()) as slot:
        prompt_tokens = completion_tokens = 0
        try:
            content = await slot.post_raw(call.path, call.body)
            try:
                answer = orjson.loads(content)
                prompt_tokens, completion_tokens = usage_of(answer)
                figures = timings_of(answer)
                if drop_cache_figures(answer):
                    content = orjson.dumps(answer)
                await slot.remember(figures)
            except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
                pass
        except LlamaError as error:
            await slot.failed(error)
            raise _from_llama(error) from error
        finally:
            await asyncio.shield(keys.record_usage(key, prompt_tokens, completion_tokens))
    return content


async def stream(call: ApiCall, key: CallerKey, *, limiter: KeyLimiter | None = None) -> AsyncIterator[bytes | None]:
    """A streamed answer. Yields ``None`` first, once llama-server has begun answering (anything
    that fails before that raises ApiError, for a plain error response), then its SSE bytes as
    they come. A failure after that ends the stream with an OpenAI-shaped error event.

    Closing the iteration early (the client went away) closes the upstream request, which
    frees llama-server's slot, and gives back the serving slot and the key's place.
    """
    tally = StreamTally()
    unrecorded = False
    try:
        async with _turn(call, key, limiter or get_limiter()) as slot:
            unrecorded = True
            upstream = slot.stream_raw(call.path, call.body, pace_s=settings.API_FRAME_S)
            try:
                try:
                    data = await upstream.__anext__()
                except StopAsyncIteration:
                    raise _broken() from None
                except LlamaError as error:
                    await slot.failed(error)
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
                    await slot.failed(error)
                    yield _from_llama(error).sse_event()  # a half event is dropped: it cannot be read
                    return
                if not tally.finished:
                    yield _broken().sse_event()
                else:
                    await slot.remember(tally.timings())
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
