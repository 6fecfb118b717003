"""The re-check of directory people: every ``LDAP_RECHECK_S`` (at most 5 minutes, Celery beat), each
account that logged in through the directory is looked up again with the service account, with
the same user search (its filter: a person the filter excludes, such as one disabled, is not
found) or DN template, and the required group. Whoever is gone or no longer allowed is disabled,
so their sessions, open pages and API keys stop at their next request (``check_quota``); whoever
only the re-check had disabled and is allowed again is enabled.

A directory that fails during a round (down, stopped, refusing the service account) changes nobody
from then on: the round stops with the error logged and the next round tries again. A failure is
never read as "this person is gone".

django-auth-ldap reads its users one login at a time and turns every directory error into "no
such user", so the round asks the directory itself, with python-ldap and the same settings. So does
``check_directory``, Django's system check at start-up (``migrate``): a warning naming what is wrong
(unreachable, the service account refused, a certificate refused, a missing search base).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import ldap
from django.conf import settings
from django.core import checks
from django.db.models import Q
from ldap.dn import escape_dn_chars
from ldap.filter import escape_filter_chars

from chat.accounts.external import set_active_by_directory
from chat.models import Account

log = logging.getLogger(__name__)

# How each group type names its members: by DN, or (posixGroup) by username.
MEMBER_ATTRIBUTES = {"GroupOfNamesType": "member", "GroupOfUniqueNamesType": "uniqueMember"}


class DirectoryUnavailable(Exception):
    """The directory could not be asked (down, stopped, refused the service account, bad certificate)."""


@dataclass
class RecheckResult:
    checked: int = 0
    disabled: list[str] = field(default_factory=list)
    enabled: list[str] = field(default_factory=list)
    failed: str = ""  # the error that ended the round early, when one did


def _connect():
    connection = ldap.initialize(settings.AUTH_LDAP_SERVER_URI, bytes_mode=False)
    for option, value in settings.AUTH_LDAP_CONNECTION_OPTIONS.items():
        connection.set_option(option, value)
    if settings.AUTH_LDAP_START_TLS:
        connection.start_tls_s()
    connection.simple_bind_s(settings.AUTH_LDAP_BIND_DN, settings.AUTH_LDAP_BIND_PASSWORD)
    return connection


def _entry_dn(connection, username: str) -> str | None:
    """The person's DN as a login would find it now; None when the directory has no such (allowed) entry."""
    search = getattr(settings, "AUTH_LDAP_USER_SEARCH", None)
    if search is not None:
        found = connection.search_s(
            search.base_dn, search.scope, search.filterstr % {"user": escape_filter_chars(username)}, ["1.1"]
        )
        entries = [dn for dn, _attributes in found if dn]
        return entries[0] if len(entries) == 1 else None
    dn = settings.AUTH_LDAP_USER_DN_TEMPLATE % {"user": escape_dn_chars(username)}
    try:
        connection.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["1.1"])
    except ldap.NO_SUCH_OBJECT:
        return None
    return dn


def _in_required_group(connection, dn: str, username: str) -> bool:
    group = getattr(settings, "AUTH_LDAP_REQUIRE_GROUP", None)
    if not group:
        return True
    kind = type(settings.AUTH_LDAP_GROUP_TYPE).__name__
    if kind == "PosixGroupType":
        return connection.compare_s(group, "memberUid", username)
    if kind in MEMBER_ATTRIBUTES:
        return connection.compare_s(group, MEMBER_ATTRIBUTES[kind], dn)
    # Active Directory: the group's members, read from the person's entry.
    found = connection.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["memberOf"])
    return any(value.decode().lower() == group.lower() for _dn, attrs in found for value in attrs.get("memberOf", []))


def allowed_in_directory(connection, username: str) -> bool:
    """Whether a login of ``username`` would pass the directory's checks now (its password aside).
    Raises ldap.LDAPError when the directory cannot say."""
    dn = _entry_dn(connection, username)
    return dn is not None and _in_required_group(connection, dn, username)


def _described(error: ldap.LDAPError) -> str:
    """python-ldap's own words for an error (its description and the server's detail: no password)."""
    details = error.args[0] if error.args and isinstance(error.args[0], dict) else {}
    return "; ".join(str(details[key]) for key in ("desc", "info") if details.get(key)) or type(error).__name__


def _certificate_refused(url: str, timeout: float) -> str:
    """Why an ``ldaps://`` directory's certificate is refused, in OpenSSL's words ('' when it is not, or
    nothing answers within ``timeout``): a failed LDAPS handshake reaches us from libldap only as
    "Can't contact LDAP server", as a port nobody listens on does. The same CA file and host name
    libldap checks, through Python's ``ssl``; only to name the failure, never to decide a login."""
    try:
        parts = urlsplit(url)
        if parts.scheme != "ldaps" or not parts.hostname:
            return ""
        address = (parts.hostname, parts.port or 636)
        context = ssl.create_default_context(
            cafile=settings.AUTH_LDAP_CONNECTION_OPTIONS.get(ldap.OPT_X_TLS_CACERTFILE)
        )
        with (
            socket.create_connection(address, timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=parts.hostname),
        ):
            return ""
    except ssl.SSLCertVerificationError as error:
        return error.verify_message
    except (OSError, ValueError):  # unreachable, a handshake that hangs, a URL of several hosts
        return ""


def directory_problem() -> str:
    """What keeps the directory from being asked, in words for the person starting the app ('' when
    nothing): unreachable, the service account refused, a certificate refused, a search base missing."""
    url, timeout = settings.AUTH_LDAP_SERVER_URI, settings.LDAP_TIMEOUT_S
    try:
        connection = _connect()
    except ldap.INVALID_CREDENTIALS:
        return f"the directory {url} refused the service account QWENWEB_LDAP_BIND_DN (wrong DN or password)"
    except (ldap.SERVER_DOWN, ldap.TIMEOUT) as error:
        if refused := _certificate_refused(url, timeout):
            return (
                f"the directory {url} answers, but its TLS certificate is refused: {refused} "
                "(not signed by QWENWEB_LDAP_CA_FILE, or not made for this host name?)"
            )
        return f"the directory {url} cannot be reached within {timeout:g} s ({_described(error)})"
    except ldap.LDAPError as error:
        return f"the directory {url} cannot be used: {_described(error)} (a certificate not signed by QWENWEB_LDAP_CA_FILE?)"
    try:
        search = getattr(settings, "AUTH_LDAP_USER_SEARCH", None)
        if search is not None:
            connection.search_s(search.base_dn, ldap.SCOPE_BASE, "(objectClass=*)", ["1.1"])
    except ldap.NO_SUCH_OBJECT:
        return f"QWENWEB_LDAP_USER_BASE {search.base_dn} does not exist in the directory {url}"
    except ldap.LDAPError as error:
        return f"the directory {url} cannot be searched: {_described(error)}"
    finally:
        with contextlib.suppress(ldap.LDAPError):
            connection.unbind_s()
    return ""


def check_directory(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Django's system check (run by ``migrate`` at every start): the directory asked once, within
    its timeout, and a readable warning when it cannot be. A warning, not an error: local accounts
    (the first admin's) work without the directory, so the app still starts."""
    if not settings.LDAP_ENABLED:
        return []
    problem = directory_problem()
    if not problem:
        return []
    return [checks.Warning(f"Directory login (LDAP): {problem}.", id="qwenweb.W050")]


def recheck_directory() -> RecheckResult:
    """One round over every directory account (see the module's docstring)."""
    result = RecheckResult()
    if not settings.LDAP_ENABLED:
        return result
    people = list(
        Account.objects.exclude(directory_dn="")
        .filter(Q(user__is_active=True) | Q(disabled_by_directory=True))
        .values_list("user_id", "user__username", "user__is_active")
    )
    try:
        connection = _connect()
    except ldap.LDAPError as error:
        result.failed = type(error).__name__
        log.warning("directory re-check: the directory cannot be asked (%s); nobody changed", result.failed)
        return result
    try:
        for user_id, username, active in people:
            allowed = allowed_in_directory(connection, username)
            result.checked += 1
            if active and not allowed:
                set_active_by_directory(user_id, False)
                result.disabled.append(username)
            elif not active and allowed:
                set_active_by_directory(user_id, True)
                result.enabled.append(username)
    except ldap.LDAPError as error:
        result.failed = type(error).__name__
        log.warning("directory re-check stopped after %d people: %s", result.checked, result.failed)
    finally:
        with contextlib.suppress(ldap.LDAPError):
            connection.unbind_s()
    if result.disabled or result.enabled:
        log.info("directory re-check: disabled %s; enabled %s", result.disabled, result.enabled)
    return result
