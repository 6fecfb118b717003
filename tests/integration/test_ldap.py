"""Directory login against a real OpenLDAP ``slapd`` (tests/support/ldap_server.py) over StartTLS
and over LDAPS with the test's own CA (and a CA that did not sign its certificate): the login page (Django's test client through the real login view and
form), group mapping into qwenweb groups and staff, the people the directory refuses, a directory
that is stopped (SIGSTOP) or killed, local accounts beside it, and the re-check that disables a
person removed or disabled in the directory, whose API key the running app then refuses."""

from __future__ import annotations

import logging
import tempfile
import threading
import uuid
from pathlib import Path

import httpx
import ldap
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from chat.accounts.directory_check import check_directory, recheck_directory
from chat.api.keys import create_key
from chat.models import Account
from qwenweb.ldap_settings import ldap_settings
from tests.support.client import base_url, make_user
from tests.support.ldap_server import (
    PASSWORDS,
    PEOPLE,
    READER_PASSWORD,
    Directory,
    group_dn,
    person_dn,
)
from tests.support.tls import make_certificates

# A login that waits on a stopped directory answers after a few of its timeouts; far past that it hangs.
HANG_S = 60
UNREACHABLE = (
    "The directory server cannot be reached, so directory accounts cannot log in right now. "
    "Try again in a few minutes; if it lasts, tell a staff member."
)
UNREACHABLE_ZH = "无法连接目录服务器，目录账户暂时无法登录。请过几分钟再试；如果持续如此，请告知工作人员。"
WRONG = "Your username and password didn't match. Please try again."


def directory_settings(directory: Directory, **changes: str) -> dict:
    """The settings the app makes of this environment, as an office would set it (``changes``: other variables)."""
    return ldap_settings(directory.environment(**changes), settings.AUTHENTICATION_BACKENDS)


def ldaps_settings(directory: Directory, **changes: str) -> dict:
    """The settings for the directory's ``ldaps://`` URL: TLS from the first byte, no StartTLS."""
    return directory_settings(directory, QWENWEB_LDAP_URL=directory.ldaps_url, QWENWEB_LDAP_START_TLS="", **changes)


def start_directory() -> Directory:
    return Directory(Path(tempfile.mkdtemp(prefix="qwenweb-ldap-"))).start()


@pytest.fixture(scope="module")
def shared_directory():
    directory = start_directory()
    yield directory
    directory.close()


@pytest.fixture
def directory(shared_directory):
    with override_settings(**directory_settings(shared_directory)):
        yield shared_directory


@pytest.fixture
def own_directory():
    """A directory of this test's own, to stop and kill."""
    directory = start_directory()
    try:
        with override_settings(**directory_settings(directory)):
            yield directory
    finally:
        directory.close()


def log_in(username: str, password: str, language: str = "en"):
    """The login page posted; (response, whether a session is logged in)."""
    client = Client(SERVER_NAME="127.0.0.1", HTTP_ACCEPT_LANGUAGE=language)
    response = client.post("/login/", {"username": username, "password": password})
    return response, "_auth_user_id" in client.session


def log_in_unless_it_hangs(username: str, password: str, language: str = "en"):
    answer: list = []
    thread = threading.Thread(target=lambda: answer.append(log_in(username, password, language)), daemon=True)
    thread.start()
    thread.join(HANG_S)
    assert answer, f"the login page did not answer within {HANG_S} s"
    return answer[0]


def add_person(directory: Directory, groups: tuple[str, ...] = ("qwenweb-users",)) -> tuple[str, str]:
    uid, password = f"p{uuid.uuid4().hex[:8]}", "Person-pass-9"
    directory.change(
        f"dn: {person_dn(uid)}\nchangetype: add\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid}\nsn: {uid}\n"
        f"userPassword: {password}\n"
    )
    for group in groups:
        directory.change(f"dn: {group_dn(group)}\nchangetype: modify\nadd: member\nmember: {person_dn(uid)}\n")
    return uid, password


def test_a_directory_login_maps_groups_and_staff(directory, caplog):
    caplog.set_level(logging.DEBUG)
    response, logged_in = log_in("alice", PASSWORDS["alice"])
    assert response.status_code == 302 and logged_in
    alice = get_user_model().objects.get(username="alice")
    assert alice.is_staff and not alice.has_usable_password()
    assert (alice.first_name, alice.email) == ("Alice", "alice@example.org")
    assert list(alice.groups.values_list("name", flat=True)) == ["Analysts"]
    assert Account.objects.get(user=alice).directory_dn == person_dn("alice")
    response, logged_in = log_in("Bob", PASSWORDS["bob"])
    assert logged_in
    bob = get_user_model().objects.get(username="bob")
    assert not bob.is_staff and list(bob.groups.values_list("name", flat=True)) == ["Analysts"]
    # Leaving a directory group leaves the qwenweb group at the next login; staff likewise.
    directory.change(f"dn: {group_dn('analysts')}\nchangetype: modify\ndelete: member\nmember: {person_dn('bob')}\n")
    try:
        assert log_in("bob", PASSWORDS["bob"])[1]
        assert not bob.groups.exists()
    finally:
        directory.change(f"dn: {group_dn('analysts')}\nchangetype: modify\nadd: member\nmember: {person_dn('bob')}\n")
    for secret in (*PASSWORDS.values(), READER_PASSWORD):
        assert secret not in caplog.text


def test_the_directory_refuses_the_disabled_the_ungrouped_and_a_wrong_password(directory):
    for username, password in [("carol", PASSWORDS["carol"]), ("erin", PASSWORDS["erin"]), ("bob", "not-his")]:
        response, logged_in = log_in(username, password)
        assert response.status_code == 200 and not logged_in
        assert WRONG in response.content.decode()
    assert not get_user_model().objects.filter(username__in=["carol", "erin"]).exists()


def test_a_local_account_keeps_its_name_against_the_directory(directory):
    uid, directory_password = add_person(directory)
    local = make_user(uid)
    assert not log_in(uid, directory_password)[1]
    assert log_in(uid, local.raw_password)[1]
    local.refresh_from_db()
    assert local.has_usable_password() and not Account.objects.filter(user=local).exclude(directory_dn="").exists()


def test_a_stopped_or_killed_directory_is_named_on_the_login_page_and_lets_nobody_in(own_directory):
    admin = make_user(is_staff=True, is_superuser=True)
    assert log_in("bob", PASSWORDS["bob"])[1]  # bob has an account made by the directory
    own_directory.stop()
    try:
        response, logged_in = log_in_unless_it_hangs("bob", PASSWORDS["bob"])
        assert response.status_code == 200 and not logged_in
        assert UNREACHABLE in response.content.decode()
        response, logged_in = log_in_unless_it_hangs("bob", PASSWORDS["bob"], "zh-hans")
        assert UNREACHABLE_ZH in response.content.decode() and not logged_in
        assert log_in_unless_it_hangs(admin.username, admin.raw_password)[1]
        result = recheck_directory()
        assert result.failed and not result.disabled
    finally:
        own_directory.go()
    own_directory.kill()
    response, logged_in = log_in_unless_it_hangs("bob", PASSWORDS["bob"])
    assert UNREACHABLE in response.content.decode() and not logged_in
    assert log_in(admin.username, admin.raw_password)[1]
    assert get_user_model().objects.get(username="bob").is_active


@pytest.mark.usefixtures("web_server")
def test_the_recheck_disables_people_removed_or_disabled_in_the_directory_and_their_keys_stop(directory):
    removed, removed_password = add_person(directory)
    disabled, disabled_password = add_person(directory)
    left, left_password = add_person(directory)  # leaves QWENWEB_LDAP_REQUIRE_GROUP
    for uid, password in [(removed, removed_password), (disabled, disabled_password), (left, left_password)]:
        assert log_in(uid, password)[1]
    page = Client(SERVER_NAME="127.0.0.1")
    page.post("/login/", {"username": removed, "password": removed_password})
    assert page.get("/").status_code == 200
    _row, key = create_key(get_user_model().objects.get(username=removed), "script")

    def models_status() -> httpx.Response:
        return httpx.get(base_url() + "/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=30)

    assert models_status().status_code == 200
    assert recheck_directory().disabled == []
    directory.change(f"dn: {person_dn(removed)}\nchangetype: delete\n")
    directory.change(f"dn: {person_dn(disabled)}\nchangetype: modify\nadd: description\ndescription: disabled\n")
    required = group_dn("qwenweb-users")
    directory.change(f"dn: {required}\nchangetype: modify\ndelete: member\nmember: {person_dn(left)}\n")
    result = recheck_directory()
    assert sorted(result.disabled) == sorted([removed, disabled, left]) and not result.failed
    assert page.get("/").status_code == 302  # the open session is no longer theirs
    refused = models_status()
    assert refused.status_code == 401
    assert refused.json()["error"]["message"] == "The account this API key belongs to is disabled."
    assert not log_in(disabled, disabled_password)[1]
    # Enabled again in the directory: the next round enables the account (staff did not disable it).
    directory.change(f"dn: {person_dn(disabled)}\nchangetype: modify\ndelete: description\n")
    assert recheck_directory().enabled == [disabled]
    assert log_in(disabled, disabled_password)[1]


def test_the_start_up_check_names_what_is_wrong_with_the_directory(directory, tmp_path):
    assert check_directory() == []
    with override_settings(AUTH_LDAP_BIND_PASSWORD="not-the-one"):
        [warning] = check_directory()
    assert "refused the service account QWENWEB_LDAP_BIND_DN" in warning.msg and "not-the-one" not in warning.msg
    foreign = make_certificates(tmp_path).ca  # a CA that did not sign the directory's certificate
    options = {**settings.AUTH_LDAP_CONNECTION_OPTIONS, ldap.OPT_X_TLS_CACERTFILE: str(foreign)}
    options[ldap.OPT_X_TLS_NEWCTX] = options.pop(ldap.OPT_X_TLS_NEWCTX)
    with override_settings(AUTH_LDAP_CONNECTION_OPTIONS=options):
        [warning] = check_directory()
    assert "cannot be used" in warning.msg and "certificate" in warning.msg
    with override_settings(AUTH_LDAP_SERVER_URI="ldap://127.0.0.1:1"):
        [warning] = check_directory()
    assert "cannot be reached within 2 s" in warning.msg


def test_a_person_logs_in_over_ldaps_with_the_ca_file(shared_directory):
    uid, password = add_person(shared_directory)
    with override_settings(**ldaps_settings(shared_directory)):
        assert not settings.AUTH_LDAP_START_TLS
        assert check_directory() == []
        assert not log_in(uid, "wrong")[1]
        response, logged_in = log_in(uid, password)
        assert response.status_code == 302 and logged_in
        assert Account.objects.get(user__username=uid).directory_dn == person_dn(uid)
        assert not recheck_directory().failed


def test_over_ldaps_a_certificate_the_ca_file_did_not_sign_lets_nobody_in_and_is_named_at_start_up(
    shared_directory, tmp_path
):
    admin = make_user(is_staff=True, is_superuser=True)
    foreign = make_certificates(tmp_path).ca  # a CA that did not sign the directory's certificate
    with override_settings(**ldaps_settings(shared_directory, QWENWEB_LDAP_CA_FILE=str(foreign))):
        response, logged_in = log_in_unless_it_hangs("bob", PASSWORDS["bob"])
        assert response.status_code == 200 and not logged_in
        assert UNREACHABLE in response.content.decode()
        assert log_in(admin.username, admin.raw_password)[1]
        assert recheck_directory().failed
        [warning] = check_directory()
    assert warning.id == "qwenweb.W050"
    # OpenSSL's reason in between (slapd sends its CA too: "self-signed certificate in certificate chain").
    assert f"the directory {shared_directory.ldaps_url} answers, but its TLS certificate is refused: " in warning.msg
    assert "(not signed by QWENWEB_LDAP_CA_FILE, or not made for this host name?)" in warning.msg


def test_a_direct_bind_logs_in_without_a_search_and_the_recheck_reads_the_entry(shared_directory):
    direct = directory_settings(
        shared_directory,
        QWENWEB_LDAP_USER_BASE="",
        QWENWEB_LDAP_USER_DN_TEMPLATE=f"uid=%(user)s,{PEOPLE}",
        QWENWEB_LDAP_REQUIRE_GROUP="",
        QWENWEB_LDAP_STAFF_GROUP="",
        QWENWEB_LDAP_GROUP_MAP="",
        QWENWEB_LDAP_GROUP_BASE="",
    )
    with override_settings(**direct):
        uid, password = add_person(shared_directory, groups=())
        assert not log_in(uid, "wrong")[1]
        assert log_in(uid, password)[1]
        assert Account.objects.get(user__username=uid).directory_dn == person_dn(uid)
        shared_directory.change(f"dn: {person_dn(uid)}\nchangetype: delete\n")
        assert uid in recheck_directory().disabled
