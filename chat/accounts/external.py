"""Accounts an outside directory answers for (the LDAP directory, an OIDC provider): what a login
through one records, and how a re-check disables or enables such a person.

A person the re-check disabled (``Account.disabled_by_directory``) is enabled again by it, or by
their next login through the directory, once the directory allows them; someone staff disabled
stays disabled.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.db import transaction

from chat.accounts.groups import set_directory_groups
from chat.accounts.quotas import account_of
from chat.models import Account


@transaction.atomic
def external_login(user, entry: dict[str, str], group_names: Iterable[str], managed: Iterable[str]) -> None:
    """What a successful login through a directory records: its ``entry`` (``Account`` fields: the
    LDAP DN, the OIDC subject), the mapped groups among the ``managed`` ones, and the person enabled
    again when only a re-check had disabled them."""
    account = account_of(user.pk)
    for name, value in entry.items():
        setattr(account, name, value)
    fields = list(entry)
    if account.disabled_by_directory:
        account.disabled_by_directory = False
        fields.append("disabled_by_directory")
        get_user_model().objects.filter(pk=user.pk).update(is_active=True)
        user.is_active = True
    account.save(update_fields=fields)
    set_directory_groups(user, group_names, managed)


def set_active_by_directory(user_id: int, active: bool) -> None:
    """A re-check's verdict: the person disabled (marked as the re-check's doing) or enabled again."""
    with transaction.atomic():
        get_user_model().objects.filter(pk=user_id).update(is_active=active)
        Account.objects.filter(user_id=user_id).update(disabled_by_directory=not active)
