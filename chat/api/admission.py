"""Who may make an API call and how many: the caller's key (401), its requests per minute (429), its
owner's daily quotas (429), the model it names (404) loaded (503), and the key's places in flight (429).
Everything before the fair queue; the relay (``chat.api.relay``) takes it from there."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.accounts.profiles import ProfileRefused, profile_for, profiles_for
from chat.accounts.quotas import AccountDisabled, QuotaExceeded, check_quota
from chat.api import keys
from chat.api.calls import KINDS, ApiCall
from chat.api.errors import ApiError, from_llama, not_found
from chat.api.keys import CallerKey
from chat.api.limits import OverLimit, TooManyRequests, get_limiter
from chat.api.request_fields import parse_request
from monitor.public import (
    LlamaError,
    LoadFailed,
    ProfileUnavailable,
    ServerProfile,
    serving_pool,
)


async def admit(authorization: str | None) -> CallerKey:
    """The caller's key (401 when missing, wrong or revoked), counted against its requests per minute
    (429), in one hop to a database thread."""
    return await sync_to_async(_admit)(keys.bearer_key(authorization))


def _admit(bearer_key: str) -> CallerKey:
    key = keys.caller_of(bearer_key)
    limit = settings.API_KEY_RPM
    try:
        get_limiter().count_request(key.id, limit)
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
    authorization: str | None, endpoint: str, read_body: Callable[[], bytes]
) -> tuple[CallerKey, ApiCall]:
    """A call's key admitted (``admit``), its owner's daily quotas counted (429 named in OpenAI's shape,
    before any model is loaded for someone over them), the request parsed and checked (400) and the
    profile its ``model`` names found (404), in one hop to a database thread; then that profile loaded
    when it is not (503 when it cannot be). ``read_body`` gives the request's body: read only for a
    caller who passed the key, rate and quota checks."""
    key, body, profile = await sync_to_async(_open_call)(keys.bearer_key(authorization), endpoint, read_body)
    returns_documents = bool(body.pop("return_documents", False))
    try:
        pool = await serving_pool(profile)
    except LoadFailed as error:
        # The reason (paths, llama-server's log) is for admins, on the profile's page and timeline.
        message = _("The model '%(model)s' could not be loaded right now.") % {"model": body["model"][:100]}
        raise ApiError(503, message, type="server_error", code="model_not_loaded") from error
    except LlamaError as error:  # its server is down
        raise from_llama(error) from error
    return key, ApiCall(endpoint=endpoint, body=body, pool=pool, returns_documents=returns_documents)


def _open_call(bearer_key: str, endpoint: str, read_body: Callable[[], bytes]) -> tuple[CallerKey, dict, ServerProfile]:
    key = _admit(bearer_key)
    try:
        with transaction.atomic():  # the quota's reads and writes in one transaction (one commit)
            check_quota(key.owner_id)
    except QuotaExceeded as error:
        raise ApiError(429, str(error), type="insufficient_quota", code=error.code) from error
    except AccountDisabled as error:
        raise ApiError(401, str(error), code="account_disabled") from error
    body = parse_request(endpoint, read_body())
    try:
        profile = profile_for(key.owner_id, body["model"])
    except ProfileRefused as error:  # open only to groups the key's owner is not in
        raise ApiError(403, str(error), param="model", code="model_not_permitted") from error
    except ProfileUnavailable as error:
        raise not_found(body["model"]) from error
    if profile.kind != KINDS[endpoint]:
        raise _wrong_kind(key.owner_id, endpoint, body["model"])
    return key, body, profile


def _wrong_kind(owner_id: int, endpoint: str, model: str) -> ApiError:
    """400 naming the models that do answer this endpoint (those the key's owner may use)."""
    names = list(profiles_for(owner_id, KINDS[endpoint]).order_by("name").values_list("name", flat=True)[:20])
    return ApiError(
        400,
        _("The model '%(model)s' does not answer /v1/%(endpoint)s. Models that do: %(names)s.")
        % {"model": model[:100], "endpoint": endpoint, "names": ", ".join(names) or _("none on this server")},
        param="model",
        code="model_not_supported",
    )


@asynccontextmanager
async def key_place(key: CallerKey) -> AsyncIterator[None]:
    """One of the key's places in flight for the block (429 when all are taken)."""
    try:
        async with get_limiter().hold(key.id, key.concurrency_limit):
            yield
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
