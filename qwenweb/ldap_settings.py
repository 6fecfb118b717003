"""Directory login (LDAP / Active Directory) from the environment: the settings django-auth-ldap
reads (``AUTH_LDAP_*``) and qwenweb's own (``LDAP_*``), or only ``LDAP_ENABLED = False`` when
``QWENWEB_LDAP_URL`` is empty. docs/accounts.md lists every variable.

Every directory call is bounded: ``QWENWEB_LDAP_TIMEOUT_S`` is libldap's connect timeout
(``OPT_NETWORK_TIMEOUT``) and its limit on each synchronous operation (``OPT_TIMEOUT``), so a
directory that accepts connections and answers nothing costs a login that long, not forever.
"""

from __future__ import annotations

import json
import math
import ssl
from collections.abc import Mapping

import ldap
from django.core.exceptions import ImproperlyConfigured
from django_auth_ldap.config import (
    ActiveDirectoryGroupType,
    GroupOfNamesType,
    GroupOfUniqueNamesType,
    LDAPSearch,
    PosixGroupType,
)

# The group object class each type searches for, and its django-auth-ldap type.
GROUP_TYPES = {
    "groupOfNames": ("(objectClass=groupOfNames)", GroupOfNamesType),
    "groupOfUniqueNames": ("(objectClass=groupOfUniqueNames)", GroupOfUniqueNamesType),
    "posixGroup": ("(objectClass=posixGroup)", PosixGroupType),
    "activeDirectory": ("(objectClass=group)", ActiveDirectoryGroupType),
}
# The longest the re-check of directory people may wait between two rounds (issue 50: 5 minutes).
RECHECK_MAX_S = 300
# A call to the directory or the provider: more than this is a hang by another name (issue 50).
TIMEOUT_MAX_S = 60


def bounded_number(raw: str, variable: str, low: float, high: float = math.inf) -> float:
    """``raw`` as a number from ``low`` to ``high``, or a refusal naming ``variable``: a timeout of 0 or
    less is libldap's "no limit", a re-check every 0 minutes runs without pause."""
    try:
        number = float(raw)
    except ValueError:
        number = math.nan
    if not low <= number <= high:  # NaN too
        upper = f" and at most {high:g}" if high < math.inf else ""
        raise ImproperlyConfigured(f"{variable} must be a number of at least {low:g}{upper}, not {raw!r}")
    return number


def recheck_seconds(raw: str, variable: str) -> float:
    """The re-check's interval from ``*_RECHECK_MINUTES``: at least 6 s, at most ``RECHECK_MAX_S`` (a
    longer one is read as that)."""
    return min(bounded_number(raw, variable, 0.1) * 60, RECHECK_MAX_S)


def ca_file(raw: str, variable: str) -> str:
    """``raw`` ('' for the default CAs), refused at start-up unless it names a CA certificate (PEM) this
    process can read: a missing or unreadable one would otherwise surface at the first login as a
    directory or provider that "cannot be reached"."""
    if raw:
        try:
            ssl.create_default_context(cafile=raw)
        except (OSError, ssl.SSLError) as error:
            raise ImproperlyConfigured(
                f"{variable} names {raw!r}, which is not a CA certificate (PEM) this process can read: {error}"
            ) from error
    return raw


def json_group_map(raw: str, variable: str, *, fold_case: bool) -> dict[str, str]:
    """``{"directory group": "qwenweb group name", ...}`` (JSON) from ``variable`` (LDAP: DNs, compared
    lower-case: ``fold_case``; OIDC: the groups claim's values, compared as given)."""
    if not raw.strip():
        return {}
    try:
        mapping = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ImproperlyConfigured(f"{variable} is not JSON: {error}") from error
    if not isinstance(mapping, dict) or not all(isinstance(v, str) and v.strip() for v in mapping.values()):
        raise ImproperlyConfigured(f'{variable} must be {{"directory group": "qwenweb group name", ...}}')
    return {(group.lower() if fold_case else group): name.strip() for group, name in mapping.items()}


def ldap_settings(environ: Mapping[str, str], backends: list[str]) -> dict:
    """The settings for this environment (``qwenweb.settings`` adds them to its own); ``backends``:
    the authentication backends without the directory's. Local accounts come first: the first admin
    logs in whatever the directory does, and a directory account (it has no usable password here)
    falls through to the directory. ``LDAP_RECHECK_S`` is always set: the re-check, scheduled
    always, does nothing while directory login is off."""

    def value(name: str, default: str = "") -> str:
        return environ.get(f"QWENWEB_LDAP_{name}", default).strip()

    url = value("URL")
    recheck_s = recheck_seconds(value("RECHECK_MINUTES", "5"), "QWENWEB_LDAP_RECHECK_MINUTES")
    if not url:
        return {"LDAP_ENABLED": False, "LDAP_RECHECK_S": recheck_s}
    if not url.startswith(("ldap://", "ldaps://")):
        raise ImproperlyConfigured(f"QWENWEB_LDAP_URL must start with ldap:// or ldaps://, not {url!r}")
    timeout = bounded_number(value("TIMEOUT_S", "5"), "QWENWEB_LDAP_TIMEOUT_S", 0.1, TIMEOUT_MAX_S)
    options: dict = {ldap.OPT_NETWORK_TIMEOUT: timeout, ldap.OPT_TIMEOUT: timeout, ldap.OPT_REFERRALS: 0}
    if ca := ca_file(value("CA_FILE"), "QWENWEB_LDAP_CA_FILE"):
        options[ldap.OPT_X_TLS_CACERTFILE] = ca
    # Certificates are always checked; NEWCTX last, so the options above apply to this connection.
    options[ldap.OPT_X_TLS_REQUIRE_CERT] = ldap.OPT_X_TLS_DEMAND
    options[ldap.OPT_X_TLS_NEWCTX] = 0
    group_type = value("GROUP_TYPE", "groupOfNames")
    if group_type not in GROUP_TYPES:
        raise ImproperlyConfigured(f"QWENWEB_LDAP_GROUP_TYPE must be one of {', '.join(GROUP_TYPES)}")
    group_filter, group_class = GROUP_TYPES[group_type]
    result = {
        "LDAP_ENABLED": True,
        "AUTHENTICATION_BACKENDS": [*backends, "chat.accounts.directory.DirectoryBackend"],
        "LDAP_TIMEOUT_S": timeout,
        "LDAP_GROUP_MAP": json_group_map(value("GROUP_MAP"), "QWENWEB_LDAP_GROUP_MAP", fold_case=True),
        "LDAP_RECHECK_S": recheck_s,
        "AUTH_LDAP_SERVER_URI": url,
        "AUTH_LDAP_BIND_DN": value("BIND_DN"),
        "AUTH_LDAP_BIND_PASSWORD": environ.get("QWENWEB_LDAP_BIND_PASSWORD", ""),
        "AUTH_LDAP_START_TLS": value("START_TLS", "0").lower() in ("1", "true", "yes", "on"),
        "AUTH_LDAP_CONNECTION_OPTIONS": options,
        "AUTH_LDAP_USER_ATTR_MAP": {
            "first_name": value("ATTR_FIRST_NAME", "givenName"),
            "last_name": value("ATTR_LAST_NAME", "sn"),
            "email": value("ATTR_EMAIL", "mail"),
        },
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        "AUTH_LDAP_FIND_GROUP_PERMS": False,
        "AUTH_LDAP_CACHE_TIMEOUT": 0,
    }
    if value("USER_DN_TEMPLATE"):
        result["AUTH_LDAP_USER_DN_TEMPLATE"] = value("USER_DN_TEMPLATE")
    elif value("USER_BASE"):
        result["AUTH_LDAP_USER_SEARCH"] = LDAPSearch(
            value("USER_BASE"), ldap.SCOPE_SUBTREE, value("USER_FILTER", "(uid=%(user)s)")
        )
    else:
        raise ImproperlyConfigured(
            "QWENWEB_LDAP_URL is set: set QWENWEB_LDAP_USER_BASE or QWENWEB_LDAP_USER_DN_TEMPLATE"
        )
    if value("GROUP_BASE"):
        result["AUTH_LDAP_GROUP_SEARCH"] = LDAPSearch(value("GROUP_BASE"), ldap.SCOPE_SUBTREE, group_filter)
        result["AUTH_LDAP_GROUP_TYPE"] = group_class()
    if value("REQUIRE_GROUP"):
        result["AUTH_LDAP_REQUIRE_GROUP"] = value("REQUIRE_GROUP")
    if value("STAFF_GROUP"):
        result["AUTH_LDAP_USER_FLAGS_BY_GROUP"] = {"is_staff": value("STAFF_GROUP")}
    needs_groups = value("REQUIRE_GROUP") or value("STAFF_GROUP") or result["LDAP_GROUP_MAP"]
    if needs_groups and not value("GROUP_BASE"):
        raise ImproperlyConfigured("Directory groups are used: set QWENWEB_LDAP_GROUP_BASE")
    return result
