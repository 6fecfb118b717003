"""Which chat profiles a person may use: the one answer for the chat page, its socket and the API.

A profile open to people (``available_to_users``) and tied to no group is open to everyone, so a
single-box install without groups is unchanged. A profile tied to groups (``GroupPolicy.profiles``)
is open only to the members of those groups, and to staff (who set the profiles up and answer for
them). The profiles hidden from a person are one read of a statement built once (``hidden_profile_ids``).
"""

from __future__ import annotations

import functools

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from chat.errors import ChatError
from chat.models import GroupPolicy
from monitor.public import ProfileUnavailable, ServerProfile, user_profiles


class ProfileRefused(ChatError):
    """The profile exists but is open only to groups the person is not in."""


def profiles_for(user_id: int, kind: str | None = None) -> QuerySet[ServerProfile]:
    """The profiles this person may pick for a conversation or name as an API model; of one kind
    (``ServerProfile.Kind``) when given: a conversation's are ``chat``. Reads the database at once
    (``hidden_profile_ids``): call it on a database thread, not on the event loop."""
    hidden = hidden_profile_ids(user_id)
    profiles = user_profiles(kind)
    return profiles.exclude(pk__in=hidden) if hidden else profiles


def hidden_profile_ids(user_id: int) -> list[int]:
    """The profiles tied to groups this person is not in (none for staff): one read of a statement
    built once. Every turn reads its profile through here: the same filter as ORM subqueries cost
    about 1.5 ms of CPU a turn to build and compile on a 2-core host, this read about 0.1 ms."""
    with connection.cursor() as cursor:
        cursor.execute(_hidden_sql(), [user_id, user_id])
        return [row[0] for row in cursor.fetchall()]


@functools.cache
def _hidden_sql() -> str:
    quote, users = connection.ops.quote_name, get_user_model()._meta
    ties, policy = GroupPolicy.profiles.through._meta, GroupPolicy._meta
    member = get_user_model().groups.through._meta
    profile, tie_policy = quote(ties.get_field("serverprofile").column), quote(ties.get_field("grouppolicy").column)
    return (
        f"SELECT DISTINCT t.{profile} FROM {quote(ties.db_table)} t"
        f" WHERE NOT EXISTS (SELECT 1 FROM {quote(users.db_table)} u"
        f" WHERE u.{quote(users.pk.column)} = %s AND u.{quote(users.get_field('is_staff').column)})"
        f" AND t.{profile} NOT IN (SELECT o.{profile} FROM {quote(ties.db_table)} o"
        f" JOIN {quote(policy.db_table)} p ON p.{quote(policy.pk.column)} = o.{tie_policy}"
        f" JOIN {quote(member.db_table)} m ON m.{quote(member.get_field('group').column)}"
        f" = p.{quote(policy.get_field('group').column)}"
        f" WHERE m.{quote(member.get_field('user').column)} = %s)"
    )


def refusal_message(name: str) -> str:
    """What a person is told when they name a profile open only to other groups (chat and API alike)."""
    return _(
        "The server profile %(name)s is open only to some groups, and you are in none of them. Ask a staff member."
    ) % {"name": name[:64]}


def profile_for(user_id: int, name: str | None = None) -> ServerProfile:
    """The profile ``name``, of any kind (or this person's default chat profile: the default profile
    when they may use it, else the first chat profile they may). ProfileRefused when it is open only
    to other groups; ProfileUnavailable when there is no such profile (or none at all) for people."""
    if name:
        profile = profiles_for(user_id).filter(name=name).first()
        if profile is None and user_profiles().filter(name=name).exists():
            raise ProfileRefused(refusal_message(name))
    else:
        chat = profiles_for(user_id, ServerProfile.Kind.CHAT)  # the default answers chats
        profile = chat.filter(is_default=True).first() or chat.first()
    if profile is None:
        raise ProfileUnavailable(_("No server profile named %(name)s is available.") % {"name": name or "default"})
    return profile


def conversation_profile_for(user_id: int, profile_id: int | None) -> ServerProfile:
    """The profile a conversation picked while its owner may still use it; else their default one."""
    if profile_id:
        profile = profiles_for(user_id, ServerProfile.Kind.CHAT).filter(pk=profile_id).first()
        if profile is not None:
            return profile
    return profile_for(user_id)
