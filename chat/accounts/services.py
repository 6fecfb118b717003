"""What staff do to accounts (approve, reject, enable, disable, reset a password, set quotas),
and what the login and password pages need to know about one."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from chat.accounts.quotas import account_of
from chat.errors import ChatError, NotFound
from chat.models import Account


def _user(user_id: int):
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        raise NotFound(_("No such user."))
    return user


def _may_change(staff, user) -> None:
    """A superuser's account is changed only by a superuser: staff who reset one's password or
    disabled it would take over (or lock out) the Django admin's every permission."""
    if user.is_superuser and not staff.is_superuser:
        raise ChatError(_("Only a superuser can change a superuser's account."))


def approve(user_id: int) -> None:
    user = _user(user_id)
    Account.objects.filter(user=user).update(approval=Account.Approval.APPROVED)
    user.is_active = True
    user.save(update_fields=["is_active"])


def reject(user_id: int) -> str:
    """A pending sign-up is deleted (it never had any data); returns its username."""
    user = _user(user_id)
    if not Account.objects.filter(user=user, approval=Account.Approval.PENDING).exists():
        raise ChatError(_("Only an account waiting for approval can be rejected."))
    username = user.get_username()
    user.delete()
    return username


def set_enabled(staff, user_id: int, enabled: bool) -> None:
    """Disabled people cannot log in; their sessions, open sockets and API keys stop at their next request."""
    user = _user(user_id)
    if user.pk == staff.pk and not enabled:
        raise ChatError(_("You cannot disable your own account."))
    _may_change(staff, user)
    if Account.objects.filter(user=user, approval=Account.Approval.PENDING).exists():
        raise ChatError(_("This account is waiting for approval: approve or reject it."))
    user.is_active = enabled
    user.save(update_fields=["is_active"])


def reset_password(staff, user_id: int, password: str = "") -> str:
    """Sets ``password`` (or a generated one) and makes the person change it at their next login.
    Returns the password, to show once to the staff member."""
    user = _user(user_id)
    _may_change(staff, user)
    password = password or secrets.token_urlsafe(12)
    try:
        validate_password(password, user)
    except ValidationError as error:
        raise ChatError(" ".join(error.messages)) from error
    user.set_password(password)
    user.save(update_fields=["password"])
    account = account_of(user.pk)
    account.must_change_password = True
    account.save(update_fields=["must_change_password"])
    return password


def set_quotas(user_id: int, turns_per_day: int | None, tokens_per_day: int | None) -> None:
    account = account_of(_user(user_id).pk)
    account.turns_per_day = turns_per_day
    account.tokens_per_day = tokens_per_day
    account.save(update_fields=["turns_per_day", "tokens_per_day"])


def must_change_password(user) -> bool:
    return Account.objects.filter(user_id=user.pk, must_change_password=True).exists()


def password_changed(user) -> None:
    Account.objects.filter(user_id=user.pk).update(must_change_password=False)


def login_refusal(user) -> str:
    """Why this user (whose password was right) may not log in: waiting for approval, or disabled."""
    if Account.objects.filter(user_id=user.pk, approval=Account.Approval.PENDING).exists():
        return _("Your account is waiting for approval by a staff member. Try again once they have approved it.")
    return _("Your account is disabled. Ask a staff member to enable it.")
