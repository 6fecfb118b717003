"""The re-check of OIDC people and the start-up check of the provider, shaped like the LDAP ones
(directory_check.py).

Every ``OIDC_RECHECK_S`` (at most 5 minutes, Celery beat) each account that logged in through the
provider (this issuer's) is asked about again: its sealed refresh token is exchanged at the token endpoint (a
refresh-token grant), and the new access token read at the userinfo endpoint. A provider that
answers ``invalid_grant`` (the person disabled, removed, or their sessions ended there), a userinfo
for someone else, or claims without ``QWENWEB_OIDC_REQUIRE_GROUP`` disable the person, so their
sessions, open pages and API keys stop at their next request; whoever only the re-check had
disabled and is allowed again is enabled. The provider's new refresh token (rotation) is kept.

A provider that fails during a round changes nobody from then on: the round stops with the error's
type logged and the next one tries again. An account without a refresh token (a provider that gave
none) cannot be re-checked: it is counted in ``unchecked`` and a warning names how many; its API keys are
refused until it logs in again (``chat.api.keys``), so a person disabled at the provider loses them at once;
the start-up check warns (``qwenweb.W052``) when the provider offers ``offline_access`` and it is not asked for.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.core import checks
from django.db.models import Q

from chat.accounts.external import set_active_by_directory
from chat.accounts.oidc import allowed_by_claims
from chat.accounts.oidc_provider import (
    ProviderUnavailable,
    RefreshRefused,
    discovery_document,
    provider_endpoints,
    refresh,
    seal,
    signing_keys,
    unseal,
)
from chat.accounts.oidc_provider import userinfo as read_userinfo
from chat.models import Account

log = logging.getLogger(__name__)


@dataclass
class OidcRecheckResult:
    checked: int = 0
    unchecked: int = 0
    disabled: list[str] = field(default_factory=list)
    enabled: list[str] = field(default_factory=list)
    failed: str = ""  # the error that ended the round early, when one did


def provider_problem() -> str:
    """What keeps the provider from being used, in words for the person starting the app ('' when
    nothing): unreachable, a discovery document that is not the issuer's, no signing keys."""
    try:
        keys = signing_keys(provider_endpoints())
    except ProviderUnavailable as error:
        return f"the provider {settings.OIDC_ISSUER}: {error}"
    return "" if keys else f"the provider {settings.OIDC_ISSUER} lists no signing keys"


def refresh_problem() -> str:
    """Why the re-check may not work, when the provider's discovery document says: it offers
    ``offline_access`` and ``QWENWEB_OIDC_SCOPES`` does not ask for it ('' when nothing is known)."""
    if settings.OIDC_ENDPOINTS or "offline_access" in settings.OIDC_RP_SCOPES.split():
        return ""
    try:
        offered = discovery_document().get("scopes_supported")
    except ProviderUnavailable:
        return ""  # W051 says so
    if not isinstance(offered, list) or "offline_access" not in offered:
        return ""
    return (
        "the provider offers offline_access and QWENWEB_OIDC_SCOPES does not ask for it: its refresh tokens "
        "may end with the person's session (the re-check then disables them) or not be given at all (then "
        "nobody is re-checked and the API keys of a person disabled there keep working)"
    )


def check_oidc(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Django's system check (run by ``migrate`` at every start): the provider asked once, within its
    timeout. A warning, not an error: local accounts work without it, so the app still starts."""
    if not settings.OIDC_ENABLED:
        return []
    if problem := provider_problem():
        return [checks.Warning(f"OIDC login: {problem}.", id="qwenweb.W051")]
    if problem := refresh_problem():
        return [checks.Warning(f"OIDC re-check: {problem}.", id="qwenweb.W052")]
    return []


def _allowed(endpoints: dict[str, str], account: Account) -> bool:
    """Whether the provider still allows this person; their rotated refresh token kept. Raises
    ProviderUnavailable when it cannot say."""
    try:
        tokens = refresh(endpoints, unseal(account.oidc_refresh_token))
    except RefreshRefused:
        return False
    if tokens.get("refresh_token"):
        Account.objects.filter(pk=account.pk).update(oidc_refresh_token=seal(tokens["refresh_token"]))
    claims = read_userinfo(endpoints, tokens.get("access_token") or "")
    return claims.get("sub") == account.oidc_subject and allowed_by_claims(claims)


def recheck_oidc() -> OidcRecheckResult:
    """One round over every OIDC account (see the module's docstring)."""
    result = OidcRecheckResult()
    if not settings.OIDC_ENABLED:
        return result
    people = list(
        Account.objects.filter(oidc_issuer=settings.OIDC_ISSUER)
        .exclude(oidc_subject="")
        .filter(Q(user__is_active=True) | Q(disabled_by_directory=True))
        .select_related("user")
    )
    try:
        endpoints = provider_endpoints()
        for account in people:
            if not unseal(account.oidc_refresh_token):
                if account.oidc_refresh_token:  # sealed with another SECRET_KEY: its API keys stop (chat.api.keys)
                    Account.objects.filter(pk=account.pk).update(oidc_refresh_token="")
                result.unchecked += 1
                continue
            allowed = _allowed(endpoints, account)
            result.checked += 1
            if account.user.is_active and not allowed:
                set_active_by_directory(account.user_id, False)
                result.disabled.append(account.user.username)
            elif not account.user.is_active and allowed:
                set_active_by_directory(account.user_id, True)
                result.enabled.append(account.user.username)
    except ProviderUnavailable as error:
        result.failed = str(error)
        log.warning("OIDC re-check stopped after %d people: %s", result.checked, result.failed)
    if result.unchecked:
        log.warning(
            "OIDC re-check: %d account(s) have no refresh token, so they cannot be checked and stay as they are "
            "until their next login (a provider that gave none, or a new DJANGO_SECRET_KEY; see docs/accounts.md)",
            result.unchecked,
        )
    if result.disabled or result.enabled:
        log.info("OIDC re-check: disabled %s; enabled %s", result.disabled, result.enabled)
    return result
