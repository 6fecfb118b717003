"""OIDC login (Keycloak, Authentik, ... on the intranet) from the environment: the settings
mozilla-django-oidc reads (``OIDC_*``) and qwenweb's own, or only ``OIDC_ENABLED = False`` when
``QWENWEB_OIDC_ISSUER`` is empty. docs/accounts.md lists every variable.

The provider's endpoints come from its discovery document (``ISSUER/.well-known/openid-configuration``,
read by ``chat.accounts.oidc_provider`` at each login's start and by the start-up check, within the
timeout) unless all four are given here. Every call to the provider is bounded by
``QWENWEB_OIDC_TIMEOUT_S`` (``OIDC_TIMEOUT``, which mozilla-django-oidc passes to each request).
"""

from __future__ import annotations

from collections.abc import Mapping

from django.core.exceptions import ImproperlyConfigured

from qwenweb.ldap_settings import TIMEOUT_MAX_S, bounded_number, ca_file, json_group_map, recheck_seconds

BACKEND = "chat.accounts.oidc.ProviderBackend"
ENDPOINTS = ("AUTHORIZATION_ENDPOINT", "TOKEN_ENDPOINT", "USERINFO_ENDPOINT", "JWKS_ENDPOINT")


def oidc_settings(environ: Mapping[str, str], backends: list[str]) -> dict:
    """The settings for this environment (``qwenweb.settings`` adds them to its own); ``backends``: the
    authentication backends so far, the OIDC one added last (a local account never asks the provider).
    ``OIDC_RECHECK_S`` is always set: the re-check, scheduled always, does nothing while OIDC is off."""

    def value(name: str, default: str = "") -> str:
        return environ.get(f"QWENWEB_OIDC_{name}", default).strip()

    issuer = value("ISSUER").rstrip("/")
    recheck_s = recheck_seconds(value("RECHECK_MINUTES", "5"), "QWENWEB_OIDC_RECHECK_MINUTES")
    if not issuer:
        return {"OIDC_ENABLED": False, "OIDC_RECHECK_S": recheck_s}
    if not issuer.startswith(("https://", "http://")):
        raise ImproperlyConfigured(f"QWENWEB_OIDC_ISSUER must be an http(s):// URL, not {issuer!r}")
    if not value("CLIENT_ID"):
        raise ImproperlyConfigured("QWENWEB_OIDC_ISSUER is set: set QWENWEB_OIDC_CLIENT_ID (and its secret)")
    endpoints = {name: value(name) for name in ENDPOINTS}
    if any(endpoints.values()) and not all(endpoints.values()):
        raise ImproperlyConfigured(
            "Give all four QWENWEB_OIDC_*_ENDPOINT or none (then the issuer's discovery document names them)"
        )
    scopes = value("SCOPES", "openid email profile")
    if "openid" not in scopes.split():
        raise ImproperlyConfigured("QWENWEB_OIDC_SCOPES must include openid")
    return {
        "OIDC_ENABLED": True,
        "AUTHENTICATION_BACKENDS": [*(path for path in backends if path != BACKEND), BACKEND],
        "OIDC_ISSUER": issuer,
        "OIDC_PROVIDER_NAME": value("PROVIDER_NAME", "OIDC"),
        # Empty: read from the discovery document at each login's start.
        "OIDC_ENDPOINTS": endpoints if all(endpoints.values()) else {},
        "OIDC_RP_CLIENT_ID": value("CLIENT_ID"),
        "OIDC_RP_CLIENT_SECRET": environ.get("QWENWEB_OIDC_CLIENT_SECRET", ""),
        "OIDC_RP_SIGN_ALGO": value("SIGN_ALGO", "RS256"),
        "OIDC_RP_SCOPES": scopes,
        "OIDC_USE_PKCE": True,
        "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
        "OIDC_USE_NONCE": True,
        "OIDC_TIMEOUT": bounded_number(value("TIMEOUT_S", "5"), "QWENWEB_OIDC_TIMEOUT_S", 0.1, TIMEOUT_MAX_S),
        "OIDC_VERIFY_SSL": ca_file(value("CA_FILE"), "QWENWEB_OIDC_CA_FILE") or True,
        "OIDC_USERNAME_CLAIM": value("USERNAME_CLAIM", "preferred_username"),
        "OIDC_GROUPS_CLAIM": value("GROUPS_CLAIM", "groups"),
        "OIDC_REQUIRE_GROUP": value("REQUIRE_GROUP"),
        "OIDC_STAFF_GROUP": value("STAFF_GROUP"),
        "OIDC_GROUP_MAP": json_group_map(value("GROUP_MAP"), "QWENWEB_OIDC_GROUP_MAP", fold_case=False),
        "OIDC_RECHECK_S": recheck_s,
        "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc-callback",
    }
