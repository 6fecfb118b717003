"""OIDC login's settings as the environment gives them (qwenweb/oidc_settings.py): off by default, PKCE
and a bounded timeout always, the backend last and once, and a readable refusal of a bad setting."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from qwenweb.oidc_settings import BACKEND, oidc_settings

BASE = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
ISSUER = {"QWENWEB_OIDC_ISSUER": "https://sso.office.lan/realms/office/", "QWENWEB_OIDC_CLIENT_ID": "qwenweb"}


def test_off_without_an_issuer_and_the_recheck_scheduled_anyway():
    assert oidc_settings({}, BASE) == {"OIDC_ENABLED": False, "OIDC_RECHECK_S": 300.0}
    assert not settings.OIDC_ENABLED
    assert settings.CELERY_BEAT_SCHEDULE["recheck-oidc"]["task"] == "chat.tasks.recheck_oidc"


def test_pkce_a_timeout_and_the_backend_last_and_once():
    values = oidc_settings({**ISSUER, "QWENWEB_OIDC_TIMEOUT_S": "3", "QWENWEB_OIDC_RECHECK_MINUTES": "60"}, BASE)
    assert values["OIDC_USE_PKCE"] and values["OIDC_PKCE_CODE_CHALLENGE_METHOD"] == "S256"
    assert values["OIDC_TIMEOUT"] == 3 and values["OIDC_RECHECK_S"] == 300  # never longer than 5 minutes
    assert values["OIDC_ISSUER"] == "https://sso.office.lan/realms/office"
    assert values["OIDC_ENDPOINTS"] == {}  # discovery
    assert values["AUTHENTICATION_BACKENDS"] == [*BASE, BACKEND]
    assert oidc_settings(ISSUER, values["AUTHENTICATION_BACKENDS"])["AUTHENTICATION_BACKENDS"] == [*BASE, BACKEND]


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"QWENWEB_OIDC_ISSUER": "sso.office.lan"}, "QWENWEB_OIDC_ISSUER"),
        ({"QWENWEB_OIDC_CLIENT_ID": ""}, "QWENWEB_OIDC_CLIENT_ID"),
        ({"QWENWEB_OIDC_TOKEN_ENDPOINT": "https://sso.office.lan/token"}, "all four"),
        ({"QWENWEB_OIDC_SCOPES": "email profile"}, "openid"),
        ({"QWENWEB_OIDC_GROUP_MAP": "{not json"}, "QWENWEB_OIDC_GROUP_MAP"),
        ({"QWENWEB_OIDC_GROUP_MAP": '{"analysts": ""}'}, "QWENWEB_OIDC_GROUP_MAP"),
        ({"QWENWEB_OIDC_TIMEOUT_S": "-1"}, "QWENWEB_OIDC_TIMEOUT_S must be a number of at least 0.1"),
        ({"QWENWEB_OIDC_TIMEOUT_S": "0"}, "QWENWEB_OIDC_TIMEOUT_S"),
        ({"QWENWEB_OIDC_TIMEOUT_S": "3600"}, "QWENWEB_OIDC_TIMEOUT_S .* at most 60"),
        ({"QWENWEB_OIDC_TIMEOUT_S": "five"}, "QWENWEB_OIDC_TIMEOUT_S .* not 'five'"),
        ({"QWENWEB_OIDC_RECHECK_MINUTES": "0"}, "QWENWEB_OIDC_RECHECK_MINUTES must be a number of at least 0.1"),
        ({"QWENWEB_OIDC_RECHECK_MINUTES": "five"}, "QWENWEB_OIDC_RECHECK_MINUTES .* not 'five'"),
        ({"QWENWEB_OIDC_CA_FILE": "/etc/qwenweb/no-such-ca.pem"}, "QWENWEB_OIDC_CA_FILE names .* not a CA certificate"),
        ({"QWENWEB_OIDC_CA_FILE": __file__}, "QWENWEB_OIDC_CA_FILE names .* not a CA certificate"),  # not PEM
    ],
)
def test_a_bad_setting_is_refused_by_name(changes, named):
    with pytest.raises(ImproperlyConfigured, match=named):
        oidc_settings({**ISSUER, **changes}, BASE)


def test_a_bad_recheck_is_refused_with_oidc_off_too():
    with pytest.raises(ImproperlyConfigured, match="QWENWEB_OIDC_RECHECK_MINUTES"):
        oidc_settings({"QWENWEB_OIDC_RECHECK_MINUTES": "0"}, BASE)
