"""What staff do to groups: make, change and delete one (name, members, daily quotas, the chat profiles
it may use), and the memberships a directory login sets.

A group is Django's own ``auth.Group`` (its members are its users); what qwenweb adds is its
``GroupPolicy``, made with it. Group names are unique, as Django's are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import Group
from django.db import transaction
from django.utils.translation import gettext as _

from chat.errors import ChatError, NotFound
from chat.models import GroupPolicy


@dataclass
class GroupSettings:
    """What the group form posts, checked: its name, daily figures (None: none set; 0: no limit),
    the ids of the profiles tied to it and of its members."""

    name: str
    turns_per_day: int | None
    tokens_per_day: int | None
    profile_ids: list[int]
    member_ids: list[int]


def _named(name: str, group_id: int | None = None) -> str:
    name = " ".join(name.split())
    if not name:
        raise ChatError(_("Give the group a name."))
    if Group.objects.filter(name__iexact=name).exclude(pk=group_id).exists():
        raise ChatError(_("A group named %(name)s exists already.") % {"name": name})
    return name


def _apply(group: Group, values: GroupSettings) -> None:
    policy, _made = GroupPolicy.objects.get_or_create(group=group)
    policy.turns_per_day = values.turns_per_day
    policy.tokens_per_day = values.tokens_per_day
    policy.save(update_fields=["turns_per_day", "tokens_per_day"])
    policy.profiles.set(values.profile_ids)
    group.user_set.set(values.member_ids)


@transaction.atomic
def create_group(values: GroupSettings) -> Group:
    group = Group.objects.create(name=_named(values.name))
    _apply(group, values)
    return group


@transaction.atomic
def update_group(group_id: int, values: GroupSettings) -> Group:
    group = Group.objects.filter(pk=group_id).first()
    if group is None:
        raise NotFound(_("This group does not exist."))
    group.name = _named(values.name, group_id)
    group.save(update_fields=["name"])
    _apply(group, values)
    return group


def delete_group(group_id: int) -> str:
    """The group, its policy and memberships deleted (its profiles then open to all unless tied to
    another group); returns its name."""
    group = Group.objects.filter(pk=group_id).first()
    if group is None:
        raise NotFound(_("This group does not exist."))
    name = group.name
    group.delete()
    return name


@transaction.atomic
def set_directory_groups(user, names: Iterable[str], managed: Iterable[str]) -> None:
    """The person's memberships among the ``managed`` groups (those the directory maps to) made
    exactly ``names``: groups missing are created, groups staff made by hand outside the mapping
    are left as they are."""
    managed = set(managed)
    wanted = [name for name in names if name in managed]
    groups = []
    for name in wanted:
        group, made = Group.objects.get_or_create(name=name)
        if made:
            GroupPolicy.objects.create(group=group)
        groups.append(group)
    user.groups.remove(*user.groups.filter(name__in=managed).exclude(name__in=wanted))
    user.groups.add(*groups)
