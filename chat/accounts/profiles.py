"""Which chat profiles a person may use: the one answer for the chat page, its socket and the API.

A profile open to people (``available_to_users``) and tied to no group is open to everyone, so a
single-box install without groups is unchanged. A profile tied to groups (``GroupPolicy.profiles``)
is open only to the members of those groups, and to staff (who set the profiles up and answer for
them). Everything is one query: the person's staff flag and memberships are read inside it.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils.translation import gettext as _

from chat.errors import ChatError
from chat.models import GroupPolicy
from monitor.public import ProfileUnavailable, ServerProfile, user_profiles

_TIES = GroupPolicy.profiles.through


class ProfileRefused(ChatError):
    """The profile exists but is open only to groups the person is not in."""


def profiles_for(user_id: int, kind: str | None = None) -> QuerySet[ServerProfile]:
    """The profiles this person may pick for a conversation or name as an API model; of one kind
    (``ServerProfile.Kind``) when given: a conversation's are ``chat``."""
    tied = _TIES.objects.filter(serverprofile_id=OuterRef("pk"))
    member = tied.filter(grouppolicy__group__user=user_id)
    staff = get_user_model().objects.filter(pk=user_id, is_staff=True)
    return user_profiles(kind).filter(~Exists(tied) | Exists(member) | Q(Exists(staff)))


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
