"""Daily quotas: turns and tokens a person may use a day, counted per server-time day.

``check_quota`` is the one check both paths make when a turn starts (the chat socket through
``chat.conversations.limits``, the OpenAI API through its gateway): it refuses a disabled
account or a spent quota, else counts the turn. The turn count is raised by one conditional
UPDATE, so two turns started at once cannot both take the last one. Tokens are added when an
answer ends; the turn that crosses the token quota finishes, the next one is refused.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from chat.errors import ChatError
from chat.models import Account, DailyUsage


class QuotaExceeded(ChatError):
    """The person used today's turns or tokens; ``code`` names which."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


class AccountDisabled(ChatError):
    """Staff disabled the account (an open page or socket is refused from its next turn)."""


def effective_limits(account: Account | None) -> tuple[int, int]:
    """(turns, tokens) a day for this account; 0 is no limit."""
    turns = account.turns_per_day if account and account.turns_per_day is not None else settings.QUOTA_TURNS_PER_DAY
    tokens = account.tokens_per_day if account and account.tokens_per_day is not None else settings.QUOTA_TOKENS_PER_DAY
    return turns, tokens


def _get_or_create(model, **fields):
    """The row, read; made in a transaction of its own only when missing (once a day, per person)."""
    row = model.objects.filter(**fields).first()
    if row is not None:
        return row
    try:
        with transaction.atomic():
            return model.objects.get_or_create(**fields)[0]
    except IntegrityError:  # made by a concurrent request meanwhile
        return model.objects.get(**fields)


def account_of(user_id: int) -> Account:
    """The person's account row, made (approved, default quotas) the first time it is needed."""
    return _get_or_create(Account, user_id=user_id)


def _today_row(user_id: int) -> DailyUsage:
    return _get_or_create(DailyUsage, user_id=user_id, day=timezone.localdate())


def check_quota(user_id: int) -> None:
    """AccountDisabled or QuotaExceeded when this person may not start a turn; else the turn is counted.
    The account is read afresh: a page or key opened before staff disabled it is refused here."""
    active = get_user_model().objects.filter(pk=user_id).values_list("is_active", flat=True).first()
    if not active:
        raise AccountDisabled(_("Your account is disabled. Ask a staff member to enable it."))
    account = account_of(user_id)
    turn_limit, token_limit = effective_limits(account)
    row = _today_row(user_id)
    if token_limit and row.tokens >= token_limit:
        raise QuotaExceeded(
            _("You have reached your daily limit of %(limit)d tokens; it resets at midnight (server time).")
            % {"limit": token_limit},
            "daily_tokens_exceeded",
        )
    rows = DailyUsage.objects.filter(pk=row.pk)
    if turn_limit:
        rows = rows.filter(turns__lt=turn_limit)
    if not rows.update(turns=F("turns") + 1):
        raise QuotaExceeded(
            _("You have reached your daily limit of %(limit)d turns; it resets at midnight (server time).")
            % {"limit": turn_limit},
            "daily_turns_exceeded",
        )
    Account.objects.filter(user_id=user_id).update(last_turn_at=timezone.now())


def add_tokens(user_id: int, tokens: int) -> None:
    """Tokens an answer used, added to today's count (F expression: concurrent answers add up)."""
    if tokens > 0:
        DailyUsage.objects.filter(pk=_today_row(user_id).pk).update(tokens=F("tokens") + tokens)
