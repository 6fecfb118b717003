"""What the staff users page shows: every person with their state, last activity, usage, quotas and
groups, and every group with its members, quotas and profiles."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Q, Sum
from django.utils import timezone

from chat.accounts.quotas import daily_limits, most_generous
from chat.models import Account, GroupPolicy, Invite
from monitor.public import user_profiles


@dataclass
class UserRow:
    id: int
    username: str
    is_staff: bool
    is_active: bool
    pending: bool
    date_joined: datetime
    last_login: datetime | None
    last_turn_at: datetime | None
    turns_today: int
    tokens_today: int
    turns_total: int
    tokens_total: int
    turns_per_day: int | None  # the person's own figure; None: the default
    tokens_per_day: int | None
    turn_limit: int  # what applies; 0: no limit
    token_limit: int
    groups: list[str]
    directory: bool  # logs in through the LDAP directory or the OIDC provider

    @property
    def state(self) -> str:
        return "pending" if self.pending else ("active" if self.is_active else "disabled")


def user_rows(today: date | None = None) -> list[UserRow]:
    today = today or timezone.localdate()
    users = (
        get_user_model()
        .objects.order_by("username")
        .annotate(
            turns_today=Sum("daily_usage__turns", filter=Q(daily_usage__day=today), default=0),
            tokens_today=Sum("daily_usage__tokens", filter=Q(daily_usage__day=today), default=0),
            turns_total=Sum("daily_usage__turns", default=0),
            tokens_total=Sum("daily_usage__tokens", default=0),
            group_turns=most_generous("turns_per_day"),
            group_tokens=most_generous("tokens_per_day"),
        )
        .prefetch_related("groups")
    )
    accounts = {account.user_id: account for account in Account.objects.all()}
    rows = []
    for user in users:
        account = accounts.get(user.pk)
        turns, tokens = (account.turns_per_day, account.tokens_per_day) if account else (None, None)
        turn_limit, token_limit = daily_limits(turns, tokens, user.group_turns, user.group_tokens)
        rows.append(
            UserRow(
                id=user.pk,
                username=user.get_username(),
                is_staff=user.is_staff,
                is_active=user.is_active,
                pending=bool(account and account.approval == Account.Approval.PENDING),
                date_joined=user.date_joined,
                last_login=user.last_login,
                last_turn_at=account.last_turn_at if account else None,
                turns_today=user.turns_today,
                tokens_today=user.tokens_today,
                turns_total=user.turns_total,
                tokens_total=user.tokens_total,
                turns_per_day=turns,
                tokens_per_day=tokens,
                turn_limit=turn_limit,
                token_limit=token_limit,
                groups=sorted(group.name for group in user.groups.all()),
                directory=bool(account and (account.directory_dn or account.oidc_subject)),
            )
        )
    # Pending sign-ups first: they are what staff come here to answer.
    return sorted(rows, key=lambda row: not row.pending)


def open_invites() -> list[Invite]:
    return list(Invite.objects.filter(used_at__isnull=True, expires_at__gt=timezone.now()))


@dataclass
class GroupRow:
    id: int
    name: str
    turns_per_day: int | None  # None: the group sets none
    tokens_per_day: int | None
    profile_ids: set[int]
    member_ids: set[int]


def group_rows() -> list[GroupRow]:
    policies = {policy.group_id: policy for policy in GroupPolicy.objects.prefetch_related("profiles")}
    rows = []
    for group in Group.objects.order_by("name").prefetch_related("user_set"):
        policy = policies.get(group.pk)
        rows.append(
            GroupRow(
                id=group.pk,
                name=group.name,
                turns_per_day=policy.turns_per_day if policy else None,
                tokens_per_day=policy.tokens_per_day if policy else None,
                profile_ids={profile.pk for profile in policy.profiles.all()} if policy else set(),
                member_ids={user.pk for user in group.user_set.all()},
            )
        )
    return rows


def profile_options() -> list[tuple[int, str]]:
    """Every server profile people may use, as (id, name): what a group may be given."""
    return list(user_profiles().order_by("name").values_list("pk", "name"))
