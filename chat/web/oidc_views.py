"""Log in through the OIDC provider: mozilla-django-oidc's two views (the redirect to the provider,
with state, nonce and PKCE; the callback), thin, with qwenweb's answers on the login page instead
of a bare redirect or a 500: the provider unreachable (503), a callback that cannot be trusted (a
forged or replayed state, a foreign issuer, a bad signature: 400), a person refused (403, saying why).

The log names an error's type and our own words, never a token.
"""

from __future__ import annotations

import logging

import requests
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views import View
from jwt import PyJWTError
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from chat.accounts.oidc_provider import (
    ProviderUnavailable,
    described,
    provider_button,
    provider_endpoints,
    unreachable_message,
)
from chat.accounts.services import login_refusal

log = logging.getLogger(__name__)


def login_page(request: HttpRequest, message: str, status: int) -> HttpResponse:
    """The login page again, with ``message`` where a refusal goes."""
    context = {
        "form": AuthenticationForm(request),
        "login_message": message,
        "oidc_provider_name": provider_button(),
        "next": "",
    }
    return render(request, "registration/login.html", context, status=status)


def _unreachable(request: HttpRequest, error: ProviderUnavailable | requests.RequestException) -> HttpResponse:
    if isinstance(error, requests.RequestException):  # the library's own call (the token endpoint)
        error = described(error.request.url if error.request is not None else "the provider", error)
    log.warning("OIDC provider unavailable: %s", error)
    return login_page(request, unreachable_message(), 503)


class ProviderLoginStart(OIDCAuthenticationRequestView):
    """Off while OIDC login is off (404); the endpoints read from the provider first, so a provider
    that cannot be reached is said on our page rather than the browser's."""

    def __init__(self, **kwargs) -> None:
        View.__init__(self, **kwargs)  # the library reads its settings here, which exist only when OIDC is on

    def get(self, request):
        if not settings.OIDC_ENABLED:
            raise Http404
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider_endpoints()["AUTHORIZATION_ENDPOINT"]
        except ProviderUnavailable as error:
            return _unreachable(request, error)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        return super().get(request)


class ProviderCallback(OIDCAuthenticationCallbackView):
    def get(self, request):
        if not settings.OIDC_ENABLED:
            raise Http404
        self.user = None
        try:
            if "code" in request.GET and "oidc_states" not in request.session:
                # The library calls this a failure; it is a callback this browser never started.
                raise SuspiciousOperation("no OIDC login was started in this browser")
            return super().get(request)
        except (SuspiciousOperation, PyJWTError) as error:
            log.warning(
                "OIDC callback refused: %s", error if isinstance(error, SuspiciousOperation) else type(error).__name__
            )
            return login_page(request, self._untrusted(), 400)
        except requests.HTTPError as error:
            # The token endpoint refused the code (used already, expired, not ours): not a way in.
            status = error.response.status_code if error.response is not None else 0
            if not 400 <= status < 500:
                return _unreachable(request, ProviderUnavailable(f"the provider answered HTTP {status}"))
            log.warning("OIDC callback: the provider answered HTTP %s", status)
            return login_page(request, self._untrusted(), 400)
        except (ProviderUnavailable, requests.RequestException) as error:
            return _unreachable(request, error)

    @staticmethod
    def _untrusted() -> str:
        return _("This login could not be verified, so it was refused. Start again from the login page.")

    def login_failure(self):
        message = getattr(self.request, "oidc_refusal", "")
        if not message and self.user is not None and not self.user.is_active:
            message = login_refusal(self.user)
        if not message:
            message = _("The login through %(provider)s did not complete. Try again.") % {
                "provider": settings.OIDC_PROVIDER_NAME
            }
        return login_page(self.request, message, 403)
