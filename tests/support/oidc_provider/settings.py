"""The test provider's own Django settings (a project apart from qwenweb's): SQLite and the RSA key in
the folder ``OIDC_PROVIDER_DIR``, django-oauth-toolkit's OpenID Connect on, PKCE required."""

import os
from pathlib import Path

FOLDER = Path(os.environ["OIDC_PROVIDER_DIR"])
ISSUER = os.environ["OIDC_PROVIDER_ISSUER"]

SECRET_KEY = "the-test-provider-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.support.oidc_provider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": FOLDER / "provider.sqlite3"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Every user reaches the login form's own check, so a disabled one is told "This account is inactive."
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.AllowAllUsersModelBackend"]
LOGIN_URL = "/accounts/login/"
# Cookies are not told apart by port: on 127.0.0.1 beside the app, the provider's must have names of their own.
SESSION_COOKIE_NAME = "provider_session"
CSRF_COOKIE_NAME = "provider_csrftoken"
USE_TZ = True
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": (FOLDER / "signing-key.pem").read_text(),
    "OIDC_ISS_ENDPOINT": ISSUER,
    "PKCE_REQUIRED": True,
    # offline_access offered, as Keycloak and Authentik do (qwenweb's start-up check reads it; here it changes nothing).
    "SCOPES": {
        "openid": "OpenID Connect",
        "email": "e-mail",
        "profile": "profile and groups",
        "offline_access": "refresh tokens",
    },
    "OAUTH2_VALIDATOR_CLASS": "tests.support.oidc_provider.claims.ProviderValidator",
}
