"""Directory login (LDAP / Active Directory) through django-auth-ldap, as qwenweb wants it:

- a local account's name is never taken over by the directory (the local one keeps its password);
- a directory login records the person's entry, maps their directory groups to qwenweb groups
  (``LDAP_GROUP_MAP``; staff through django-auth-ldap's ``AUTH_LDAP_USER_FLAGS_BY_GROUP``) and
  enables them again when only the directory had disabled them (``recheck``, directory_check.py);
- a directory that fails (down, stopped, refusing the service account, a bad certificate) marks
  the login's request, so the login page says the directory is unreachable; it never lets anyone
  in, since a directory account has no usable password here;
- a session of a person disabled meanwhile is no longer theirs (django-auth-ldap's ``get_user``
  does not look at ``is_active``).

The directory's passwords are only passed to the directory: nothing here stores or logs them.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.dispatch import receiver
from django.utils.translation import gettext as _
from django_auth_ldap.backend import LDAPBackend, ldap_error

from chat.accounts.external import external_login
from chat.models import Account

log = logging.getLogger(__name__)


def unreachable_message() -> str:
    return _(
        "The directory server cannot be reached, so directory accounts cannot log in right now. "
        "Try again in a few minutes; if it lasts, tell a staff member."
    )


class DirectoryBackend(LDAPBackend):
    """django-auth-ldap's backend with the rules above (its documented extension points)."""

    def get_or_build_user(self, username, ldap_user):
        user, built = super().get_or_build_user(username, ldap_user)
        if not built and not Account.objects.filter(user=user).exclude(directory_dn="").exists():
            raise ldap_user.AuthenticationFailed("a local account has this name")
        return user, built

    def authenticate_ldap_user(self, ldap_user, password):
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is not None:
            mapping = settings.LDAP_GROUP_MAP
            names = [mapping[dn.lower()] for dn in ldap_user.group_dns if dn.lower() in mapping] if mapping else []
            directory_login(user, ldap_user.dn, names)
        return user

    def get_user(self, user_id):
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None


def directory_login(user, dn: str, group_names: list[str]) -> None:
    """What a successful directory login records: the entry, the mapped groups, enabled again when
    only the directory had disabled the person."""
    external_login(user, {"directory_dn": dn}, group_names, settings.LDAP_GROUP_MAP.values())


@receiver(ldap_error)
def directory_failed(sender, context, user=None, request=None, exception=None, **kwargs) -> None:
    """django-auth-ldap's report of a directory error: logged (its type and message: no password
    is in them), and a login's request marked so its page names the failure."""
    log.warning("directory error while %s: %s", context, type(exception).__name__)
    if request is not None:
        request.directory_unreachable = True
