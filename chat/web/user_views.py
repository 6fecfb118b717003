"""The staff users page: people with their usage, pending sign-ups, the sign-up mode, invite links,
per person: enable or disable, quotas, a temporary password; and groups (members, quotas, the
profiles they may use). Thin views over chat.accounts."""

from __future__ import annotations

import functools

from django.conf import settings
from django.contrib import messages as flash
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST

from chat.accounts import groups, selectors, services, signup
from chat.accounts.forms import GroupForm, InviteForm, QuotaForm, ResetPasswordForm, SignupModeForm, group_settings
from chat.accounts.groups import GroupSettings
from chat.errors import ChatError
from chat.web.forms import first_error


def staff_required(view):
    """Staff only; everyone else gets 403 (never a login form: the page's existence is no secret)."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_staff:
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return wrapped


def _users_page(request, *, shown_secret: str = "", secret_label: str = "", status: int = 200):
    response = render(
        request,
        "accounts/users.html",
        {
            "rows": selectors.user_rows(),
            "groups": selectors.group_rows(),
            "profile_options": selectors.profile_options(),
            "invites": selectors.open_invites(),
            "mode_form": SignupModeForm(initial={"mode": signup.signup_mode()}),
            "invite_form": InviteForm(),
            "default_turns": settings.QUOTA_TURNS_PER_DAY,
            "default_tokens": settings.QUOTA_TOKENS_PER_DAY,
            "invite_days": settings.INVITE_DAYS,
            "shown_secret": shown_secret,
            "secret_label": secret_label,
        },
        status=status,
    )
    if shown_secret:  # a page that shows a password or an invite link is kept by no cache
        response["Cache-Control"] = "no-store"
    return response


def _posted(request, form_class) -> dict | None:
    """The form's cleaned data, or None once its first error is flashed."""
    form = form_class(request.POST)
    if form.is_valid():
        return form.cleaned_data
    flash.error(request, first_error(form))
    return None


def _act(request, action) -> None:
    try:
        message = action()
    except ChatError as error:
        flash.error(request, str(error))
    else:
        flash.success(request, message)


@staff_required
@require_GET
def users(request):
    return _users_page(request)


@staff_required
@require_POST
def set_signup_mode(request):
    data = _posted(request, SignupModeForm)
    if data is not None:
        signup.set_signup_mode(data["mode"])
        flash.success(request, _("Sign-up mode saved."))
    return redirect("chat:users")


@staff_required
@require_POST
def create_invite(request):
    data = _posted(request, InviteForm)
    if data is None:
        return redirect("chat:users")
    _invite, token = signup.create_invite(request.user, data["note"])
    link = request.build_absolute_uri(reverse("chat:signup-invite", args=[token]))
    label = ngettext(
        "Invite link (shown only now; it works once, for %(days)d day):",
        "Invite link (shown only now; it works once, for %(days)d days):",
        settings.INVITE_DAYS,
    ) % {"days": settings.INVITE_DAYS}
    return _users_page(request, shown_secret=link, secret_label=label, status=201)


@staff_required
@require_POST
def revoke_invite(request, invite_id: int):
    signup.revoke_invite(invite_id)
    flash.success(request, _("Invite link revoked."))
    return redirect("chat:users")


@staff_required
@require_POST
def approve(request, user_id: int):
    _act(request, lambda: services.approve(user_id) or _("Account approved."))
    return redirect("chat:users")


@staff_required
@require_POST
def reject(request, user_id: int):
    _act(request, lambda: _("Sign-up of %(name)s rejected.") % {"name": services.reject(user_id)})
    return redirect("chat:users")


@staff_required
@require_POST
def set_enabled(request, user_id: int):
    enabled = request.POST.get("enabled") == "1"
    _act(
        request,
        lambda: (
            services.set_enabled(request.user, user_id, enabled)
            or (_("Account enabled.") if enabled else _("Account disabled."))
        ),
    )
    return redirect("chat:users")


@staff_required
@require_POST
def set_quotas(request, user_id: int):
    data = _posted(request, QuotaForm)
    if data is not None:
        _act(
            request,
            lambda: services.set_quotas(user_id, data["turns_per_day"], data["tokens_per_day"]) or _("Quotas saved."),
        )
    return redirect("chat:users")


@staff_required
@require_POST
def reset_password(request, user_id: int):
    data = _posted(request, ResetPasswordForm)
    if data is None:
        return redirect("chat:users")
    try:
        password = services.reset_password(request.user, user_id, data["password"])
    except ChatError as error:
        flash.error(request, str(error))
        return redirect("chat:users")
    label = _("Temporary password (shown only now; they must change it when they log in):")
    return _users_page(request, shown_secret=password, secret_label=label)


def _posted_group(request) -> GroupSettings | None:
    data = _posted(request, GroupForm)
    return None if data is None else group_settings(data)


@staff_required
@require_POST
def create_group(request):
    values = _posted_group(request)
    if values is not None:
        _act(request, lambda: _("Group %(name)s created.") % {"name": groups.create_group(values).name})
    return redirect(reverse("chat:users") + "#groups")


@staff_required
@require_POST
def update_group(request, group_id: int):
    values = _posted_group(request)
    if values is not None:
        _act(request, lambda: _("Group %(name)s saved.") % {"name": groups.update_group(group_id, values).name})
    return redirect(reverse("chat:users") + "#groups")


@staff_required
@require_POST
def delete_group(request, group_id: int):
    _act(request, lambda: _("Group %(name)s deleted.") % {"name": groups.delete_group(group_id)})
    return redirect(reverse("chat:users") + "#groups")
