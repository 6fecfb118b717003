"""API keys: create (shown once), check, revoke, count usage.

A key reads ``qw-<id>_<secret>``: the id finds the row, the whole key's SHA-256 is
compared in constant time. Only the hash is stored; the key itself is never logged.
Every request reads the row again, so a revoked key fails on the very next call.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.accounts.quotas import add_tokens
from chat.api.errors import ApiError
from chat.errors import ChatError, NotFound
from chat.models import ApiKey
from chat.usage import services as ledger
from chat.usage.services import UsageEntry

KEY_PREFIX = "qw-"
MAX_NAME_CHARS = 100


@dataclass(frozen=True)
class CallerKey:
    """What a request needs to know about the key that made it."""

    id: int
    owner_id: int
    concurrency_limit: int


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(owner, name: str) -> tuple[ApiKey, str]:
    """A new key for ``owner``; returns the row and the key, which is never available again."""
    name = (name or "").strip()
    if not name:
        raise ChatError(_("Give the key a name, so you can tell your keys apart."))
    if len(name) > MAX_NAME_CHARS:
        raise ChatError(
            ngettext(
                "The name is too long: the limit is %(chars)d character.",
                "The name is too long: the limit is %(chars)d characters.",
                MAX_NAME_CHARS,
            )
            % {"chars": MAX_NAME_CHARS}
        )
    limit = settings.MAX_API_KEYS_PER_USER
    if ApiKey.objects.filter(owner=owner, revoked_at__isnull=True).count() >= limit:
        raise ChatError(
            ngettext(
                "You have %(limit)d API key, the most one person may have. Revoke it to create another.",
                "You have %(limit)d API keys, the most one person may have. Revoke one to create another.",
                limit,
            )
            % {"limit": limit}
        )
    while True:
        prefix = secrets.token_hex(4)
        if not ApiKey.objects.filter(prefix=prefix).exists():
            break
    key = f"{KEY_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
    row = ApiKey.objects.create(owner=owner, name=name, prefix=prefix, key_hash=_hash(key))
    return row, key


def revoke_key(owner, key_id: int) -> ApiKey:
    row = ApiKey.objects.filter(owner=owner, pk=key_id).first()
    if row is None:
        raise NotFound(_("No such key."))
    if row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])
    return row


def list_keys(owner) -> list[ApiKey]:
    return list(ApiKey.objects.filter(owner=owner))


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, message, code="invalid_api_key")


def bearer_key(authorization: str | None) -> str:
    """The key an ``Authorization`` header carries; ApiError 401 when it carries none (no database read)."""
    scheme, _sep, key = (authorization or "").partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise _unauthorized(
            _("No API key given: send it as 'Authorization: Bearer qw-…'. Create one on the API keys page.")
        )
    return key


def caller_of(key: str) -> CallerKey:
    """The key's row, checked; ApiError 401 when it is wrong or revoked, or its owner disabled or an OIDC
    account the re-check cannot see (synchronous: the gateway's one database hop per call does more for the same request)."""
    prefix, _sep, secret = key.removeprefix(KEY_PREFIX).partition("_")
    row = None
    if key.startswith(KEY_PREFIX) and secret and len(prefix) == 8:
        row = (
            ApiKey.objects.filter(prefix=prefix)
            .values(
                "id",
                "owner_id",
                "key_hash",
                "concurrency_limit",
                "revoked_at",
                "owner__is_active",
                "owner__account__oidc_subject",
                "owner__account__oidc_refresh_token",
            )
            .first()
        )
    if row is None or not hmac.compare_digest(row["key_hash"], _hash(key)):
        raise _unauthorized(_("Incorrect API key."))
    if row["revoked_at"] is not None:
        raise _unauthorized(_("This API key was revoked."))
    if not row["owner__is_active"]:
        raise _unauthorized(_("The account this API key belongs to is disabled."))
    if row["owner__account__oidc_subject"] and not row["owner__account__oidc_refresh_token"]:
        # Its sign-in provider gave no refresh token: the re-check cannot see it disabled there (issue 50's bound).
        raise _unauthorized(
            _(
                "The account this API key belongs to cannot be checked with its sign-in provider between logins "
                "(the provider gave no refresh token), so its API keys do not work until it logs in again."
            )
        )
    return CallerKey(id=row["id"], owner_id=row["owner_id"], concurrency_limit=row["concurrency_limit"])


async def record_usage(
    key: CallerKey, prompt_tokens: int, completion_tokens: int, entry: UsageEntry | None = None
) -> None:
    """One request's figures, added to the key's and to its owner's daily usage (F expressions:
    concurrent requests add up) and, given its ``entry``, to the usage ledger, in one transaction and
    one hop to a database thread."""
    await sync_to_async(_record_usage)(key, max(prompt_tokens, 0), max(completion_tokens, 0), entry)


@transaction.atomic
def _record_usage(key: CallerKey, prompt_tokens: int, completion_tokens: int, entry: UsageEntry | None) -> None:
    if entry is not None:
        ledger.record(entry)
    add_tokens(key.owner_id, prompt_tokens + completion_tokens)
    ApiKey.objects.filter(pk=key.id).update(
        requests=F("requests") + 1,
        prompt_tokens=F("prompt_tokens") + prompt_tokens,
        completion_tokens=F("completion_tokens") + completion_tokens,
        last_used_at=timezone.now(),
    )
