"""Forms of the account pages: each checks its input where it enters."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

from chat.accounts.directory import unreachable_message
from chat.accounts.groups import GroupSettings
from chat.accounts.services import login_refusal
from chat.models import SignupSettings
from monitor.public import user_profiles


class AccountLoginForm(AuthenticationForm):
    """Django's login form that, when the password was right, says why an account may not log in
    (waiting for approval, disabled) instead of 'wrong password', and says so when the directory
    (LDAP) could not be asked. ``refusal`` holds that message."""

    refusal = ""

    def clean(self):
        try:
            return super().clean()
        except ValidationError:
            # Checked only after django-axes counted the attempt, and never while it is locked:
            # this is no way around the login throttle.
            if getattr(self.request, "directory_unreachable", False):
                self.refusal = unreachable_message()
            elif not getattr(self.request, "axes_locked_out", False):
                user = self._inactive_user()
                if user is not None:
                    self.refusal = login_refusal(user)
            raise

    def _inactive_user(self):
        username, password = self.cleaned_data.get("username"), self.cleaned_data.get("password")
        if not username or not password:
            return None
        user = get_user_model()._default_manager.filter(**{get_user_model().USERNAME_FIELD: username}).first()
        if user is None or user.is_active or not user.check_password(password):
            return None
        return user


class SignUpForm(UserCreationForm):
    """Username and password twice; Django's password validators apply."""

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username",)


class SignupModeForm(forms.Form):
    mode = forms.ChoiceField(label=_("Sign-up"), choices=SignupSettings.Mode.choices)


class InviteForm(forms.Form):
    note = forms.CharField(label=_("Note (who it is for)"), max_length=100, required=False)


class QuotaForm(forms.Form):
    turns_per_day = forms.IntegerField(label=_("Turns per day"), min_value=0, max_value=1_000_000, required=False)
    tokens_per_day = forms.IntegerField(
        label=_("Tokens per day"), min_value=0, max_value=10_000_000_000, required=False
    )


class ResetPasswordForm(forms.Form):
    password = forms.CharField(
        label=_("Temporary password (empty: generate one)"),
        max_length=128,
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
    )


class GroupForm(QuotaForm):
    """A group's name, daily figures (empty: the group sets none), profiles and members."""

    name = forms.CharField(label=_("Group name"), max_length=150)
    profiles = forms.ModelMultipleChoiceField(label=_("Profiles"), queryset=user_profiles(), required=False)
    members = forms.ModelMultipleChoiceField(
        label=_("Members"), queryset=get_user_model().objects.all(), required=False
    )


def group_settings(data: dict) -> GroupSettings:
    """A valid ``GroupForm``'s data as the group services take it."""
    return GroupSettings(
        name=data["name"],
        turns_per_day=data["turns_per_day"],
        tokens_per_day=data["tokens_per_day"],
        profile_ids=[profile.pk for profile in data["profiles"]],
        member_ids=[user.pk for user in data["members"]],
    )
