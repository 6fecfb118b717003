"""Directory login's settings as the environment gives them (qwenweb/ldap_settings.py): off by default,
every call bounded by the timeout, certificates always checked, and a readable refusal of a bad setting."""

from __future__ import annotations

import ldap
import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from qwenweb.ldap_settings import ldap_settings

BASE = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
SEARCH = {"QWENWEB_LDAP_URL": "ldaps://dc.office.lan", "QWENWEB_LDAP_USER_BASE": "ou=people,dc=office,dc=lan"}


def test_off_without_a_url_and_the_recheck_scheduled_anyway():
    assert ldap_settings({}, BASE) == {"LDAP_ENABLED": False, "LDAP_RECHECK_S": 300.0}
    assert not settings.LDAP_ENABLED
    assert settings.CELERY_BEAT_SCHEDULE["recheck-directory"]["task"] == "chat.tasks.recheck_directory"


def test_every_call_is_bounded_and_local_accounts_come_first():
    values = ldap_settings({**SEARCH, "QWENWEB_LDAP_TIMEOUT_S": "3", "QWENWEB_LDAP_RECHECK_MINUTES": "60"}, BASE)
    options = values["AUTH_LDAP_CONNECTION_OPTIONS"]
    assert options[ldap.OPT_NETWORK_TIMEOUT] == 3 and options[ldap.OPT_TIMEOUT] == 3
    assert options[ldap.OPT_X_TLS_REQUIRE_CERT] == ldap.OPT_X_TLS_DEMAND
    assert list(options)[-1] == ldap.OPT_X_TLS_NEWCTX  # last: the TLS options before it apply
    assert values["AUTHENTICATION_BACKENDS"] == [*BASE, "chat.accounts.directory.DirectoryBackend"]
    assert values["LDAP_RECHECK_S"] == 300  # never longer than 5 minutes
    assert values["AUTH_LDAP_USER_SEARCH"].filterstr == "(uid=%(user)s)"


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"QWENWEB_LDAP_URL": "dc.office.lan"}, "must start with ldap://"),
        ({"QWENWEB_LDAP_URL": "ldap://dc"}, "QWENWEB_LDAP_USER_BASE or QWENWEB_LDAP_USER_DN_TEMPLATE"),
        ({**SEARCH, "QWENWEB_LDAP_GROUP_MAP": "{not json"}, "QWENWEB_LDAP_GROUP_MAP is not JSON"),
        ({**SEARCH, "QWENWEB_LDAP_STAFF_GROUP": "cn=admins,dc=office,dc=lan"}, "set QWENWEB_LDAP_GROUP_BASE"),
        ({**SEARCH, "QWENWEB_LDAP_GROUP_TYPE": "nested"}, "QWENWEB_LDAP_GROUP_TYPE must be one of"),
        # libldap reads a timeout of 0 or less as no limit: the hang issue 50 forbids
        ({**SEARCH, "QWENWEB_LDAP_TIMEOUT_S": "-1"}, "QWENWEB_LDAP_TIMEOUT_S must be a number of at least 0.1"),
        ({**SEARCH, "QWENWEB_LDAP_TIMEOUT_S": "0"}, "QWENWEB_LDAP_TIMEOUT_S"),
        ({**SEARCH, "QWENWEB_LDAP_TIMEOUT_S": "3600"}, "QWENWEB_LDAP_TIMEOUT_S .* at most 60"),
        ({**SEARCH, "QWENWEB_LDAP_TIMEOUT_S": "five"}, "QWENWEB_LDAP_TIMEOUT_S .* not 'five'"),
        ({**SEARCH, "QWENWEB_LDAP_TIMEOUT_S": "nan"}, "QWENWEB_LDAP_TIMEOUT_S"),
        (
            {**SEARCH, "QWENWEB_LDAP_CA_FILE": "/etc/qwenweb/no-such-ca.pem"},
            "QWENWEB_LDAP_CA_FILE names .* not a CA certificate",
        ),
        # checked with directory login off too: the re-check is scheduled always
        ({"QWENWEB_LDAP_RECHECK_MINUTES": "0"}, "QWENWEB_LDAP_RECHECK_MINUTES must be a number of at least 0.1"),
        ({"QWENWEB_LDAP_RECHECK_MINUTES": "-5"}, "QWENWEB_LDAP_RECHECK_MINUTES"),
        ({"QWENWEB_LDAP_RECHECK_MINUTES": "five"}, "QWENWEB_LDAP_RECHECK_MINUTES .* not 'five'"),
    ],
)
def test_a_bad_setting_is_refused_by_name(environ, named):
    with pytest.raises(ImproperlyConfigured, match=named):
        ldap_settings(environ, BASE)
