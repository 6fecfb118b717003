"""OIDC login through mozilla-django-oidc, as qwenweb wants it:

- the authorization code flow with PKCE (S256) and a nonce; the ID token's signature (the provider's
  JWKS), its issuer (``QWENWEB_OIDC_ISSUER``, which mozilla-django-oidc does not check) and audience
  (our client id) are checked, and the userinfo's ``sub`` must be the ID token's;
- a person is known by their issuer and subject (``sub``, ``Account.oidc_subject``), never by e-mail: a local
  or directory account with the same username is never taken over (the login is refused by name);
- their name, e-mail, staff flag (``QWENWEB_OIDC_STAFF_GROUP``) and mapped groups
  (``QWENWEB_OIDC_GROUP_MAP``) are set from the claims at each login; ``QWENWEB_OIDC_REQUIRE_GROUP``
  refuses whoever is not in it;
- the refresh token is kept sealed for the re-check (oidc_check.py); no token is logged or shown.

A refusal sets ``request.oidc_refusal`` (a message fit to show); the callback view shows it.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.utils.translation import gettext as _
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from chat.accounts.external import external_login
from chat.accounts.oidc_provider import provider_endpoints, seal
from chat.models import Account


def claimed_groups(claims: dict) -> list[str]:
    """The groups claim's values (a list of strings; anything else counts as none)."""
    groups = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    return [group for group in groups if isinstance(group, str)] if isinstance(groups, list) else []


def allowed_by_claims(claims: dict) -> bool:
    required = settings.OIDC_REQUIRE_GROUP
    return not required or required in claimed_groups(claims)


class ProviderBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend with the rules above, through its documented extension points."""

    def __init__(self, *args, **kwargs) -> None:
        # Django builds every backend for every login, a local one too: nothing here may ask the
        # provider or need its settings. The endpoints are read in ``authenticate``.
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        if request is None or not settings.OIDC_ENABLED or "code" not in request.GET:
            return None
        endpoints = provider_endpoints()
        self.OIDC_OP_TOKEN_ENDPOINT = endpoints["TOKEN_ENDPOINT"]
        self.OIDC_OP_USER_ENDPOINT = endpoints["USERINFO_ENDPOINT"]
        self.OIDC_OP_JWKS_ENDPOINT = endpoints["JWKS_ENDPOINT"]
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.refresh_token = ""
        return super().authenticate(request, **kwargs)

    def get_token(self, payload):
        tokens = super().get_token(payload)
        self.refresh_token = tokens.get("refresh_token") or ""
        return tokens

    def verify_token(self, token, **kwargs):
        payload = super().verify_token(token, **kwargs)
        if payload.get("iss") != settings.OIDC_ISSUER:
            raise SuspiciousOperation("the ID token's issuer is not QWENWEB_OIDC_ISSUER")
        audience = payload.get("aud")
        if settings.OIDC_RP_CLIENT_ID not in (audience if isinstance(audience, list) else [audience]):
            raise SuspiciousOperation("the ID token is not for this client")
        return payload

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        subject = payload.get("sub")
        if not subject or claims.get("sub") != subject:
            raise SuspiciousOperation("the userinfo's subject is not the ID token's")
        claims = {**payload, **claims}
        if not allowed_by_claims(claims):
            self.request.oidc_refusal = _("Your account at %(provider)s is not allowed to use this server.") % {
                "provider": settings.OIDC_PROVIDER_NAME
            }
            return None
        account = (
            Account.objects.filter(oidc_issuer=settings.OIDC_ISSUER, oidc_subject=subject)
            .select_related("user")
            .first()
        )
        user = account.user if account else self._new_user(claims)
        if user is None:
            return None
        self._update(user, claims)
        names = [settings.OIDC_GROUP_MAP[g] for g in claimed_groups(claims) if g in settings.OIDC_GROUP_MAP]
        external_login(
            user,
            {
                "oidc_issuer": settings.OIDC_ISSUER,
                "oidc_subject": subject,
                "oidc_refresh_token": seal(self.refresh_token),
            },
            names,
            settings.OIDC_GROUP_MAP.values(),
        )
        return user

    def _new_user(self, claims: dict):
        username = claims.get(settings.OIDC_USERNAME_CLAIM)
        if not isinstance(username, str) or not username.strip() or len(username) > 150:
            self.request.oidc_refusal = _("%(provider)s did not say your username, so you cannot log in here.") % {
                "provider": settings.OIDC_PROVIDER_NAME
            }
            return None
        if self.UserModel.objects.filter(username__iexact=username.strip()).exists():
            self.request.oidc_refusal = _(
                "An account named %(name)s exists here already and is not the one of %(provider)s. Ask a staff member."
            ) % {"name": username.strip(), "provider": settings.OIDC_PROVIDER_NAME}
            return None
        user = self.UserModel(username=username.strip())
        user.set_unusable_password()
        user.save()
        return user

    def _update(self, user, claims: dict) -> None:
        user.first_name = str(claims.get("given_name") or "")[:150]
        user.last_name = str(claims.get("family_name") or "")[:150]
        user.email = str(claims.get("email") or "")[:254]
        if settings.OIDC_STAFF_GROUP:
            user.is_staff = settings.OIDC_STAFF_GROUP in claimed_groups(claims)
        user.save(update_fields=["first_name", "last_name", "email", "is_staff"])

    def get_user(self, user_id):
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None
