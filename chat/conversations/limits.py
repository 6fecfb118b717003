"""Turns a person may start: at most CHAT_TURNS_IN_FLIGHT answers being written or queued at
once, CHAT_TURNS_PER_MINUTE a minute (``check_turn_allowed``, before the turn's transaction: its
Redis counter never runs under the database's write lock), and their daily quotas
(``chat.accounts.quotas.check_quota``, first in the transaction that writes the turn, as it counts
it). Checked before anything of the turn is tokenized or ranked; each refusal names the limit.

In flight is counted from the database (an answer is 'streaming' from the moment it is
accepted, queued or not, until it ends), so every web process sees the same count; the
per-minute count is a Redis counter per person and minute.
"""

from __future__ import annotations

from django.conf import settings
from django.utils.translation import ngettext

from chat.errors import ChatError
from chat.models import Message
from monitor.public import count_in_window


class TurnLimited(ChatError):
    """The person has reached one of their turn limits."""


def turns_in_flight(user) -> int:
    return Message.objects.filter(
        conversation__owner=user, role=Message.Role.ASSISTANT, status=Message.Status.STREAMING
    ).count()


def check_turn_allowed(user) -> None:
    """TurnLimited when this person may not start another answer now (their quota aside)."""
    limit = settings.CHAT_TURNS_IN_FLIGHT
    if turns_in_flight(user) >= limit:
        raise TurnLimited(
            ngettext(
                "You already have %(count)d answer being written; wait for it to finish.",
                "You already have %(count)d answers being written; wait for one to finish.",
                limit,
            )
            % {"count": limit}
        )
    per_minute = settings.CHAT_TURNS_PER_MINUTE
    started = count_in_window(f"qwenweb:turns:{user.pk}", 60)
    if started > per_minute:
        raise TurnLimited(
            ngettext(
                "You can start at most %(count)d answer a minute; wait a moment and send again.",
                "You can start at most %(count)d answers a minute; wait a moment and send again.",
                per_minute,
            )
            % {"count": per_minute}
        )
