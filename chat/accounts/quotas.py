"""Daily quotas: turns and tokens a person may use a day, counted per server-time day.

A person's own figure applies; without one, the most generous of their groups' (``GroupPolicy``;
0, no limit, is the most generous); without either, the default from settings.

``check_quota`` is the one check both paths make when a turn starts (the chat socket through
``chat.conversations.limits``, the OpenAI API through its gateway): it refuses a disabled
account or a spent quota, else counts the turn. The turn count is raised by one conditional
UPDATE, so two turns started at once cannot both take the last one. Tokens are added when an
answer ends; the turn that crosses the token quota finishes, the next one is refused.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Case, F, FilteredRelation, OuterRef, Q, Subquery, Value, When
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.errors import ChatError
from chat.models import Account, DailyUsage, GroupPolicy

# ``Account.last_turn_at`` is stamped at most this often (seconds): the people page shows it to the
# minute, and an agent's calls in a row need not each write it.
LAST_TURN_RESOLUTION_S = 60


class QuotaExceeded(ChatError):
    """The person used today's turns or tokens; ``code`` names which."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


class AccountDisabled(ChatError):
    """Staff disabled the account (an open page or socket is refused from its next turn)."""


def daily_limits(
    turns: int | None, tokens: int | None, group_turns: int | None, group_tokens: int | None
) -> tuple[int, int]:
    """(turns, tokens) a day: the person's own figure, else their groups' most generous (``most_generous``),
    else the default; 0 is no limit."""
    return (
        _first_set(turns, group_turns, settings.QUOTA_TURNS_PER_DAY),
        _first_set(tokens, group_tokens, settings.QUOTA_TOKENS_PER_DAY),
    )


def _first_set(*figures: int | None) -> int:
    return next(figure for figure in figures if figure is not None)


def most_generous(field: str) -> Subquery:
    """For a query of users: the most generous figure ``field`` of the person's groups (0, no limit,
    before any other, then the highest); null when none of their groups sets one."""
    policies = GroupPolicy.objects.filter(group__user=OuterRef("pk"), **{f"{field}__isnull": False})
    no_limit_first = Case(When(**{field: 0}, then=Value(0)), default=Value(1))
    return Subquery(policies.order_by(no_limit_first, F(field).desc()).values(field)[:1])


def account_of(user_id: int) -> Account:
    """The person's account row, made (approved, default quotas) the first time it is needed."""
    return Account.objects.get_or_create(user_id=user_id)[0]


def _today_row(user_id: int, day=None) -> DailyUsage:
    """The person's usage row of ``day`` (default today), made when missing."""
    return DailyUsage.objects.get_or_create(user_id=user_id, day=day or timezone.localdate())[0]


def _standing(user_id: int, day) -> tuple | None:
    """(is active, account id, its turns and tokens a day, its last turn, ``day``'s usage row id, its tokens,
    the most generous turns and tokens a day of the person's groups) in one read (a missing account or
    row, or no group figure, reads as None); None when there is no such user."""
    rows = (
        get_user_model()
        .objects.filter(pk=user_id)
        .annotate(
            usage=FilteredRelation("daily_usage", condition=Q(daily_usage__day=day)),
            group_turns=most_generous("turns_per_day"),
            group_tokens=most_generous("tokens_per_day"),
        )
        .values_list(
            "is_active",
            "account__pk",
            "account__turns_per_day",
            "account__tokens_per_day",
            "account__last_turn_at",
            "usage__pk",
            "usage__tokens",
            "group_turns",
            "group_tokens",
        )
    )
    return next(iter(rows[:1]), None)


def check_quota(user_id: int) -> None:
    """AccountDisabled or QuotaExceeded when this person may not start a turn; else the turn is counted.
    The account is read afresh: a page or key opened before staff disabled it is refused here.

    Every turn of the chat and every API call comes here before its request: the account, its quotas
    and today's usage are one read, then the turn is counted (a conditional update) and stamped."""
    day = timezone.localdate()
    standing = _standing(user_id, day)
    if standing is None or not standing[0]:
        raise AccountDisabled(_("Your account is disabled. Ask a staff member to enable it."))
    _active, account_pk, turns, tokens, last_turn_at, usage_pk, used, group_turns, group_tokens = standing
    if account_pk is None:  # the person's first turn
        account = account_of(user_id)
        turns, tokens = account.turns_per_day, account.tokens_per_day
    turn_limit, token_limit = daily_limits(turns, tokens, group_turns, group_tokens)
    if usage_pk is None:  # the first turn of the day
        row = _today_row(user_id, day)
        usage_pk, used = row.pk, row.tokens
    if token_limit and used >= token_limit:
        raise QuotaExceeded(
            ngettext(
                "You have reached your daily limit of %(limit)d token; it resets at midnight (server time).",
                "You have reached your daily limit of %(limit)d tokens; it resets at midnight (server time).",
                token_limit,
            )
            % {"limit": token_limit},
            "daily_tokens_exceeded",
        )
    rows = DailyUsage.objects.filter(pk=usage_pk)
    if turn_limit:
        rows = rows.filter(turns__lt=turn_limit)
    if not rows.update(turns=F("turns") + 1):
        raise QuotaExceeded(
            ngettext(
                "You have reached your daily limit of %(limit)d turn; it resets at midnight (server time).",
                "You have reached your daily limit of %(limit)d turns; it resets at midnight (server time).",
                turn_limit,
            )
            % {"limit": turn_limit},
            "daily_turns_exceeded",
        )
    now = timezone.now()
    if last_turn_at is None or abs((now - last_turn_at).total_seconds()) >= LAST_TURN_RESOLUTION_S:
        Account.objects.filter(user_id=user_id).update(last_turn_at=now)


def add_tokens(user_id: int, tokens: int) -> None:
    """Tokens an answer used, added to today's count (F expression: concurrent answers add up)."""
    if tokens > 0 and not DailyUsage.objects.filter(user_id=user_id, day=timezone.localdate()).update(
        tokens=F("tokens") + tokens
    ):  # no row yet today (a turn that began yesterday): made, then counted
        DailyUsage.objects.filter(pk=_today_row(user_id).pk).update(tokens=F("tokens") + tokens)
