"""Reads of server profiles: by name, the default one, those people may use, those loaded at start."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils.translation import gettext as _

from monitor.models import Placement, ServerProfile
from monitor.nodes.registry import placements_here
from monitor.profiles.errors import ProfileUnavailable


def user_profiles(kind: str | None = None) -> QuerySet[ServerProfile]:
    """The profiles people may pick for a conversation or name as an API model; of one kind
    (``ServerProfile.Kind``) when given: a conversation's are ``chat``."""
    profiles = ServerProfile.objects.filter(available_to_users=True)
    return profiles if kind is None else profiles.filter(kind=kind)


def find_profile(name: str | None = None, *, for_users: bool = False) -> ServerProfile:
    """The named profile, or the default one; ProfileUnavailable when there is none to use."""
    profiles = user_profiles() if for_users else ServerProfile.objects.all()
    if name:
        profile = profiles.filter(name=name).first()
    else:
        chat = profiles.filter(kind=ServerProfile.Kind.CHAT)  # the default answers chats
        profile = chat.filter(is_default=True).first() or chat.first()
    if profile is None:
        raise ProfileUnavailable(_("No server profile named %(name)s is available.") % {"name": name or "default"})
    return profile


def startup_placements() -> list[Placement]:
    """What this node serves that should always be loaded: the default profile and those marked load-on-start."""
    return [p for p in placements_here() if p.profile.is_default or p.profile.load_on_startup]
