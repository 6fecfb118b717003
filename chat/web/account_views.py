"""A person's own account pages: log in, sign up (in the staff's mode, or with an invite), change password."""

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth import login
from django.contrib.auth.views import LoginView, PasswordChangeView
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils.translation import gettext as _

from chat.accounts import services, signup
from chat.accounts.forms import AccountLoginForm, SignUpForm
from chat.accounts.oidc_provider import provider_button
from chat.errors import ChatError
from chat.models import SignupSettings

MUST_CHANGE_PASSWORD = "must_change_password"  # session flag read by PasswordChangeRequired


class AccountLoginView(LoginView):
    authentication_form = AccountLoginForm

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["signup_open"] = signup.signup_mode() != SignupSettings.Mode.OFF
        context["oidc_provider_name"] = provider_button()
        return context

    def form_valid(self, form):
        response = super().form_valid(form)
        if services.must_change_password(form.get_user()):
            self.request.session[MUST_CHANGE_PASSWORD] = True
            flash.warning(self.request, _("Staff set a temporary password for you: choose your own now."))
            return redirect("chat:password-change")
        return response


class AccountPasswordChangeView(PasswordChangeView):
    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("chat:index")

    def form_valid(self, form):
        response = super().form_valid(form)
        services.password_changed(self.request.user)
        self.request.session.pop(MUST_CHANGE_PASSWORD, None)
        flash.success(self.request, _("Your password was changed."))
        return response


def _signup_page(request, form, *, invite_token: str | None = None, error: str = "", status: int = 200):
    mode = signup.signup_mode()
    context = {
        "form": form,
        "error": error,
        "invite_token": invite_token,
        "closed": invite_token is None and mode == SignupSettings.Mode.OFF,
        "approval": invite_token is None and mode == SignupSettings.Mode.APPROVAL,
    }
    return render(request, "accounts/signup.html", context, status=status)


def sign_up(request, invite_token: str | None = None):
    """GET: the form (or why it is closed); POST: count the attempt, check the form, make the account."""
    if request.method != "POST":
        error = ""
        if invite_token is not None:
            try:
                signup.usable_invite(invite_token)
            except ChatError as refusal:
                error = str(refusal)
        return _signup_page(request, SignUpForm(), invite_token=invite_token, error=error)
    form = SignUpForm(request.POST)
    try:
        signup.count_attempt(request.META.get("REMOTE_ADDR", ""))
        if not form.is_valid():
            return _signup_page(request, form, invite_token=invite_token, status=400)
        user = signup.sign_up(form.cleaned_data["username"], form.cleaned_data["password1"], invite_token)
    except signup.SignupRefused as refusal:
        return _signup_page(request, form, invite_token=invite_token, error=str(refusal), status=403)
    if not user.is_active:
        return render(request, "accounts/signup_pending.html", {"username": user.get_username()})
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    flash.success(request, _("Welcome! Your account is ready."))
    return redirect("chat:index")
