"""qwenweb's own calls to the OIDC provider, each within ``OIDC_TIMEOUT`` (``QWENWEB_OIDC_TIMEOUT_S``):
its endpoints (the discovery document, read at each login's start unless all four are configured),
a refresh-token grant and a userinfo request for the re-check (oidc_check.py), and the refresh token
kept sealed (Fernet, a key derived from ``SECRET_KEY``) in ``Account.oidc_refresh_token``.

A provider that cannot be asked raises ``ProviderUnavailable`` (its words hold no token); one that
answers ``invalid_grant`` to a refresh raises ``RefreshRefused``: the person is no longer allowed.
Tokens are never logged: what is logged is an error's type or the provider's HTTP status.
"""

from __future__ import annotations

import base64
import hashlib
import ssl

import requests
from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.utils.translation import gettext as _

# The endpoint names of the settings (QWENWEB_OIDC_*_ENDPOINT) and of the discovery document.
DISCOVERY_NAMES = {
    "AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "TOKEN_ENDPOINT": "token_endpoint",
    "USERINFO_ENDPOINT": "userinfo_endpoint",
    "JWKS_ENDPOINT": "jwks_uri",
}


class ProviderUnavailable(Exception):
    """The provider could not be asked, or answered what no working provider would; the message says which."""


class RefreshRefused(Exception):
    """The provider refused the person's refresh token (``invalid_grant``): disabled, removed, or signed out."""


def unreachable_message() -> str:
    return _(
        "The sign-in provider %(provider)s cannot be reached, so its accounts cannot log in right now. "
        "Try again in a few minutes; if it lasts, tell a staff member."
    ) % {"provider": settings.OIDC_PROVIDER_NAME}


def provider_button() -> str:
    """The provider's name for the login page's button, or '' when OIDC login is off."""
    return settings.OIDC_PROVIDER_NAME if settings.OIDC_ENABLED else ""


def _refused_certificate(error: BaseException) -> str:
    """OpenSSL's reason when ``error`` (requests' and urllib3's wrappers around it) is a refused certificate, else ''."""
    seen: set[int] = set()
    causes = [error]
    while causes:
        cause = causes.pop()
        if isinstance(cause, ssl.SSLCertVerificationError):
            return getattr(cause, "verify_message", "") or str(cause)
        seen.add(id(cause))
        linked = (cause.__cause__, cause.__context__, getattr(cause, "reason", None), *cause.args)
        causes += [other for other in linked if isinstance(other, BaseException) and id(other) not in seen]
    return ""


def described(url: str, error: requests.RequestException) -> str:
    """Why ``url`` could not be asked, for the log and the start-up check (no token: only the URL, an
    error's type or a certificate's refusal in OpenSSL's words)."""
    if refused := _refused_certificate(error):
        return (
            f"{url} answers, but its TLS certificate is refused: {refused} "
            "(not signed by QWENWEB_OIDC_CA_FILE, or not made for this host name?)"
        )
    if isinstance(error, (requests.ConnectionError, requests.Timeout)):
        return f"{url} cannot be reached within {settings.OIDC_TIMEOUT:g} s ({type(error).__name__})"
    return f"{url} did not answer as a provider does ({type(error).__name__})"


def _call(method: str, url: str, **kwargs) -> requests.Response:
    try:
        return requests.request(
            method, url, timeout=settings.OIDC_TIMEOUT, verify=settings.OIDC_VERIFY_SSL, allow_redirects=False, **kwargs
        )
    except requests.RequestException as error:
        raise ProviderUnavailable(described(url, error)) from error


def _json(response: requests.Response, what: str) -> dict:
    if response.status_code != 200:
        raise ProviderUnavailable(f"{what} answered HTTP {response.status_code}")
    try:
        document = response.json()
    except ValueError as error:
        raise ProviderUnavailable(f"{what} did not answer JSON") from error
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{what} did not answer a JSON object")
    return document


def _discovery_url() -> str:
    return settings.OIDC_ISSUER + "/.well-known/openid-configuration"


def discovery_document() -> dict:
    """The issuer's discovery document, whose ``issuer`` must be the configured one (OpenID Connect
    Discovery, section 4.3)."""
    url = _discovery_url()
    document = _json(_call("GET", url), url)
    if document.get("issuer") != settings.OIDC_ISSUER:
        raise ProviderUnavailable(f"{url} names the issuer {document.get('issuer')!r}, not QWENWEB_OIDC_ISSUER")
    return document


def provider_endpoints() -> dict[str, str]:
    """``{"AUTHORIZATION_ENDPOINT": url, ...}``: the configured four, or the discovery document's."""
    if settings.OIDC_ENDPOINTS:
        return settings.OIDC_ENDPOINTS
    document = discovery_document()
    missing = [key for key in DISCOVERY_NAMES.values() if not isinstance(document.get(key), str)]
    if missing:
        raise ProviderUnavailable(f"{_discovery_url()} does not name {', '.join(missing)}")
    return {name: document[key] for name, key in DISCOVERY_NAMES.items()}


def signing_keys(endpoints: dict[str, str]) -> list:
    """The provider's published keys (its JWKS), which the ID tokens' signatures are checked with."""
    url = endpoints["JWKS_ENDPOINT"]
    keys = _json(_call("GET", url), url).get("keys")
    return keys if isinstance(keys, list) else []


def refresh(endpoints: dict[str, str], refresh_token: str) -> dict:
    """A refresh-token grant: the provider's new tokens (it may rotate the refresh token)."""
    response = _call(
        "POST",
        endpoints["TOKEN_ENDPOINT"],
        data={
            "grant_type": "refresh_token",
            "refresh_token": refresh_token,
            "client_id": settings.OIDC_RP_CLIENT_ID,
            "client_secret": settings.OIDC_RP_CLIENT_SECRET,
        },
    )
    if response.status_code in (400, 401):
        try:
            error = response.json().get("error")
        except (ValueError, AttributeError):
            error = None
        if error == "invalid_grant":
            raise RefreshRefused()
    return _json(response, "the token endpoint")


def userinfo(endpoints: dict[str, str], access_token: str) -> dict:
    response = _call("GET", endpoints["USERINFO_ENDPOINT"], headers={"Authorization": f"Bearer {access_token}"})
    return _json(response, "the userinfo endpoint")


def _fernet() -> Fernet:
    key = hashlib.sha256(b"qwenweb oidc refresh token\0" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def seal(token: str) -> str:
    return _fernet().encrypt(token.encode()).decode() if token else ""


def unseal(sealed: str) -> str:
    """The refresh token, or '' when there is none or it cannot be read (``SECRET_KEY`` changed)."""
    try:
        return _fernet().decrypt(sealed.encode()).decode() if sealed else ""
    except InvalidToken:
        return ""
