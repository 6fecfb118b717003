"""Getting an account without an admin: sign-up in the mode staff chose, or an invite link.

In approval mode the account is made inactive and pending until staff approve it. An invite
makes an active account whatever the mode; its token is shown once and only its SHA-256 kept,
and it is spent by one conditional UPDATE, so two sign-ups with one link cannot both succeed.
Sign-up attempts are counted per address in Redis (SIGNUPS_PER_HOUR).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from chat.accounts.quotas import account_of
from chat.errors import ChatError
from chat.models import Account, Invite, SignupSettings
from monitor.public import count_in_window


class SignupRefused(ChatError):
    """Sign-up is off, the invite is spent or expired, or the address made too many attempts."""


def signup_mode() -> str:
    row = SignupSettings.objects.filter(pk=1).first()
    return row.mode if row else SignupSettings.Mode.OFF


def set_signup_mode(mode: str) -> None:
    if mode not in SignupSettings.Mode.values:
        raise ChatError(_("Unknown sign-up mode."))
    SignupSettings.objects.update_or_create(pk=1, defaults={"mode": mode})


def count_attempt(address: str) -> None:
    """SignupRefused when this address already tried SIGNUPS_PER_HOUR times this hour."""
    limit = settings.SIGNUPS_PER_HOUR
    attempts = count_in_window(f"qwenweb:signups:{address}", 3600)
    if attempts > limit:
        raise SignupRefused(
            _("Too many sign-up attempts from your address: at most %(count)d an hour. Try again later.")
            % {"count": limit}
        )


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_invite(staff, note: str = "") -> tuple[Invite, str]:
    """A new invite and its token (never available again)."""
    token = secrets.token_urlsafe(32)
    invite = Invite.objects.create(
        token_hash=_hash(token),
        note=note.strip()[:100],
        created_by=staff,
        expires_at=timezone.now() + timedelta(days=settings.INVITE_DAYS),
    )
    return invite, token


def revoke_invite(invite_id: int) -> None:
    Invite.objects.filter(pk=invite_id, used_at__isnull=True).delete()


def usable_invite(token: str) -> Invite:
    """The invite this token opens; SignupRefused when unknown, used or expired."""
    invite = Invite.objects.filter(token_hash=_hash(token or "")).first()
    if invite is None or invite.used_at is not None:
        raise SignupRefused(_("This invite link was already used or does not exist. Ask staff for a new one."))
    if invite.expires_at <= timezone.now():
        raise SignupRefused(_("This invite link has expired. Ask staff for a new one."))
    return invite


@transaction.atomic
def sign_up(username: str, password: str, invite_token: str | None = None):
    """The new user (active, or pending in approval mode); the form checked name and password already."""
    if invite_token is not None:
        invite = usable_invite(invite_token)
        spent = Invite.objects.filter(pk=invite.pk, used_at__isnull=True, expires_at__gt=timezone.now())
        if not spent.update(used_at=timezone.now()):
            raise SignupRefused(_("This invite link was already used or does not exist. Ask staff for a new one."))
        pending = False
    else:
        mode = signup_mode()
        if mode == SignupSettings.Mode.OFF:
            raise SignupRefused(_("Sign-up is closed. Ask a staff member for an account or an invite link."))
        pending = mode == SignupSettings.Mode.APPROVAL
    user = get_user_model().objects.create_user(username=username, password=password, is_active=not pending)
    account = account_of(user.pk)
    if pending:
        account.approval = Account.Approval.PENDING
        account.save(update_fields=["approval"])
    if invite_token is not None:
        Invite.objects.filter(pk=invite.pk).update(used_by=user)
    return user
