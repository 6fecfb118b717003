"""OIDC login against a real provider (django-oauth-toolkit in its own process:
tests/support/oidc_provider/): the login button and callback (Django's test client through the real
views, the provider's own login page through HTTP), claims mapped to qwenweb groups and staff, the
people refused, a forged state and a foreign issuer refused, a provider stopped (SIGSTOP) or killed,
a provider over HTTPS trusted through ``QWENWEB_OIDC_CA_FILE`` only, the start-up check, and the re-check that disables a person the provider disabled or deleted, whose API
key the running app then refuses."""

from __future__ import annotations

import logging
import sqlite3
import threading
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from chat.accounts.oidc_check import check_oidc, recheck_oidc
from chat.api.keys import create_key
from chat.models import Account
from qwenweb.oidc_settings import oidc_settings
from tests.support.client import base_url, make_user
from tests.support.oidc_provider import CLIENT_SECRET, PASSWORDS, Provider
from tests.support.tls import make_certificates

HANG_S = 60
UNREACHABLE = (
    "The sign-in provider Office SSO cannot be reached, so its accounts cannot log in right now. "
    "Try again in a few minutes; if it lasts, tell a staff member."
)
UNREACHABLE_ZH = "无法连接登录服务 Office SSO，其账户暂时无法登录。请过几分钟再试；如果持续如此，请告知工作人员。"
UNTRUSTED = "This login could not be verified, so it was refused. Start again from the login page."
NOT_ALLOWED = "Your account at Office SSO is not allowed to use this server."


def app_settings(provider: Provider, **changes: str) -> dict:
    return oidc_settings(provider.environment(**changes), settings.AUTHENTICATION_BACKENDS)


@pytest.fixture(scope="module")
def shared_provider():
    provider = Provider().start()
    yield provider
    provider.close()


@pytest.fixture
def provider(shared_provider):
    with override_settings(**app_settings(shared_provider)):
        yield shared_provider


@pytest.fixture
def own_provider():
    """A provider of this test's own, to stop and kill."""
    provider = Provider().start()
    try:
        with override_settings(**app_settings(provider)):
            yield provider
    finally:
        provider.close()


def person(language: str = "en") -> Client:
    return Client(SERVER_NAME="127.0.0.1", HTTP_ACCEPT_LANGUAGE=language)


def to_provider(provider: Provider, client: Client, role: str) -> httpx.Response:
    """The login button, then the provider's login page: its answer (a redirect to our callback)."""
    start = client.get("/oidc/login/")
    assert start.status_code == 302 and start["Location"].startswith(provider.issuer + "/authorize/")
    assert parse_qs(urlsplit(start["Location"]).query)["code_challenge_method"] == ["S256"]
    return provider.log_in(start["Location"], provider.name(role), PASSWORDS[role])


def callback_of(answer: httpx.Response) -> str:
    assert answer.status_code == 302, answer.text[-500:]
    location = urlsplit(answer.headers["location"])
    assert location.path == "/oidc/callback/"
    return f"{location.path}?{location.query}"


def log_in(provider: Provider, role: str, client: Client | None = None):
    """Through the provider, end to end; (our callback's response, whether a session is logged in)."""
    client = client or person()
    response = client.get(callback_of(to_provider(provider, client, role)))
    return response, "_auth_user_id" in client.session


def issued_tokens(provider: Provider) -> list[str]:
    """Every access and refresh token the provider has issued (its own database)."""
    with sqlite3.connect(provider.folder / "provider.sqlite3") as database:
        rows = database.execute(
            "SELECT token FROM oauth2_provider_accesstoken UNION SELECT token FROM oauth2_provider_refreshtoken"
        ).fetchall()
    return [token for (token,) in rows]


def test_the_login_page_offers_the_provider_only_when_it_is_set(provider):
    assert 'id="oidc-login"' in person().get("/login/").content.decode()
    assert "Log in with Office SSO" in person().get("/login/").content.decode()
    assert "使用 Office SSO 登录" in person("zh-hans").get("/login/").content.decode()
    with override_settings(OIDC_ENABLED=False):
        assert 'id="oidc-login"' not in person().get("/login/").content.decode()
        assert person().get("/oidc/login/").status_code == 404
        assert person().get("/oidc/callback/?code=x&state=y").status_code == 404


def test_an_oidc_login_maps_groups_and_staff_and_logs_no_token(provider, caplog):
    caplog.set_level(logging.DEBUG)
    response, logged_in = log_in(provider, "alice")
    assert response.status_code == 302 and response["Location"] == "/" and logged_in
    alice = get_user_model().objects.get(username=provider.name("alice"))
    assert alice.is_staff and not alice.has_usable_password()
    assert (alice.first_name, alice.email) == ("Alice", f"{provider.name('alice')}@example.org")
    assert list(alice.groups.values_list("name", flat=True)) == ["Analysts"]
    account = Account.objects.get(user=alice)
    assert account.oidc_subject and account.oidc_refresh_token
    assert log_in(provider, "bob")[1]
    bob = get_user_model().objects.get(username=provider.name("bob"))
    assert not bob.is_staff and list(bob.groups.values_list("name", flat=True)) == ["Analysts"]
    # The same person again is the same account (known by subject).
    assert log_in(provider, "alice")[1]
    assert get_user_model().objects.filter(username=provider.name("alice")).count() == 1
    tokens = issued_tokens(provider)
    assert tokens
    for secret in (*tokens, *PASSWORDS.values()):
        assert secret not in caplog.text
        assert secret not in account.oidc_refresh_token


def test_the_disabled_and_the_ungrouped_are_refused_with_a_message(provider):
    start = person().get("/oidc/login/")
    refused = provider.log_in(start["Location"], provider.name("carol"), PASSWORDS["carol"])
    assert "This account is inactive." in refused.text
    response, logged_in = log_in(provider, "erin")
    assert response.status_code == 403 and not logged_in
    assert NOT_ALLOWED in response.content.decode()
    assert not get_user_model().objects.filter(username__in=[provider.name("carol"), provider.name("erin")]).exists()


def test_a_local_account_keeps_its_name_against_the_provider(provider):
    local = make_user(provider.name("erin"))
    with override_settings(**app_settings(provider, QWENWEB_OIDC_REQUIRE_GROUP="")):  # erin is in no group
        response, logged_in = log_in(provider, "erin")
    assert response.status_code == 403 and not logged_in
    assert "exists here already" in response.content.decode()
    local.refresh_from_db()
    assert local.has_usable_password() and not Account.objects.filter(user=local).exclude(oidc_subject="").exists()


def test_a_forged_state_is_refused(provider):
    client = person()
    callback = callback_of(to_provider(provider, client, "bob"))
    query = parse_qs(urlsplit(callback).query)
    forged = "/oidc/callback/?" + urlencode({"code": query["code"][0], "state": "forged-" + query["state"][0]})
    response = client.get(forged)
    assert response.status_code == 400 and UNTRUSTED in response.content.decode()
    assert "_auth_user_id" not in client.session
    # The same callback in another browser (a session that never started this login), in its language.
    stranger = person("zh-hans")
    response = stranger.get(callback)
    assert (
        response.status_code == 400
        and "无法验证此次登录，因此已被拒绝。请从登录页面重新开始。" in response.content.decode()
    )
    assert "_auth_user_id" not in stranger.session
    # The genuine one still logs in: the refusals above were the state's doing.
    assert client.get(callback).status_code == 302 and "_auth_user_id" in client.session


def test_a_foreign_issuer_is_refused(provider):
    discovered = httpx.get(provider.issuer + "/.well-known/openid-configuration").json()
    endpoints = {
        "QWENWEB_OIDC_AUTHORIZATION_ENDPOINT": discovered["authorization_endpoint"],
        "QWENWEB_OIDC_TOKEN_ENDPOINT": discovered["token_endpoint"],
        "QWENWEB_OIDC_USERINFO_ENDPOINT": discovered["userinfo_endpoint"],
        "QWENWEB_OIDC_JWKS_ENDPOINT": discovered["jwks_uri"],
    }
    # Its ID tokens name the provider as their issuer, which is not the one this app trusts.
    foreign = app_settings(provider, QWENWEB_OIDC_ISSUER="https://sso.example.org/realms/office", **endpoints)
    with override_settings(**foreign):
        response, logged_in = log_in(provider, "bob")
        assert response.status_code == 400 and not logged_in and UNTRUSTED in response.content.decode()
    with override_settings(**app_settings(provider, **endpoints)):  # the same endpoints, the right issuer
        assert log_in(provider, "bob")[1]
    # Discovery: a document naming another issuer is not used at all.
    with override_settings(OIDC_ISSUER=provider.issuer.replace("127.0.0.1", "localhost")):
        assert person().get("/oidc/login/").status_code == 503


def answers_unless_it_hangs(request):
    answer: list = []
    thread = threading.Thread(target=lambda: answer.append(request()), daemon=True)
    thread.start()
    thread.join(HANG_S)
    assert answer, f"the page did not answer within {HANG_S} s"
    return answer[0]


def test_a_stopped_or_killed_provider_is_named_on_the_login_page(own_provider):
    admin = make_user(is_staff=True)
    assert log_in(own_provider, "bob")[1]
    client = person()
    callback = callback_of(to_provider(own_provider, client, "bob"))
    own_provider.stop()
    try:
        response = answers_unless_it_hangs(lambda: person().get("/oidc/login/"))
        assert response.status_code == 503 and UNREACHABLE in response.content.decode()
        response = answers_unless_it_hangs(lambda: person("zh-hans").get("/oidc/login/"))
        assert UNREACHABLE_ZH in response.content.decode()
        # Stopped between the provider's login page and our callback: the token request times out.
        response = answers_unless_it_hangs(lambda: client.get(callback))
        assert response.status_code == 503 and UNREACHABLE in response.content.decode()
        assert "_auth_user_id" not in client.session
        local = person()
        local.post("/login/", {"username": admin.username, "password": admin.raw_password})
        assert "_auth_user_id" in local.session
        result = recheck_oidc()
        assert result.failed and not result.disabled
    finally:
        own_provider.go()
    own_provider.kill()
    response = answers_unless_it_hangs(lambda: person().get("/oidc/login/"))
    assert response.status_code == 503 and UNREACHABLE in response.content.decode()
    bob = get_user_model().objects.get(username=own_provider.name("bob"))
    assert bob.is_active, (
        bob.account.disabled_by_directory,
        bob.account.oidc_subject,
        list(Account.objects.filter(oidc_subject=bob.account.oidc_subject).values_list("user__username", flat=True)),
    )


@pytest.mark.usefixtures("web_server")
def test_the_recheck_disables_people_the_provider_disabled_or_deleted_and_their_keys_stop(own_provider, caplog):
    page = person()
    assert log_in(own_provider, "bob", page)[1]
    assert page.get("/").status_code == 200
    bob = get_user_model().objects.get(username=own_provider.name("bob"))
    _row, key = create_key(bob, "script")

    def models_status() -> httpx.Response:
        return httpx.get(base_url() + "/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=30)

    assert models_status().status_code == 200
    result = recheck_oidc()
    assert result.checked >= 1 and result.disabled == [] and not result.failed
    own_provider.set_active(own_provider.name("bob"), False)
    result = recheck_oidc()
    assert result.disabled == [own_provider.name("bob")] and not result.failed
    assert page.get("/").status_code == 302  # the open session is no longer theirs
    refused = models_status()
    assert refused.status_code == 401
    assert refused.json()["error"]["message"] == "The account this API key belongs to is disabled."
    # Enabled again at the provider: the next round enables the account (staff did not disable it).
    own_provider.set_active(own_provider.name("bob"), True)
    assert recheck_oidc().enabled == [own_provider.name("bob")]
    assert models_status().status_code == 200
    # Deleted at the provider (its tokens with them): disabled, and the next round leaves them so.
    assert log_in(own_provider, "alice")[1]
    own_provider.delete(own_provider.name("alice"))
    result = recheck_oidc()
    assert result.disabled == [own_provider.name("alice")] and not result.failed
    assert not get_user_model().objects.get(username=own_provider.name("alice")).is_active
    # An account without a refresh token cannot be checked: left as it is, and the log says how many.
    Account.objects.filter(user=bob).update(oidc_refresh_token="")
    with caplog.at_level(logging.WARNING, logger="chat.accounts.oidc_check"):
        result = recheck_oidc()
    assert result.unchecked == 1 and result.enabled == [] and result.disabled == []
    assert "OIDC re-check: 1 account(s) have no refresh token" in caplog.text
    # ...so its API keys stop at once (no bound otherwise on a person disabled there), until it logs in again.
    refused = models_status()
    assert refused.status_code == 401 and "(the provider gave no refresh token)" in refused.json()["error"]["message"]
    assert log_in(own_provider, "bob", person())[1]
    assert models_status().status_code == 200


def test_the_start_up_check_names_what_is_wrong_with_the_provider(provider):
    assert check_oidc() == []
    with override_settings(OIDC_ISSUER="http://127.0.0.1:1/o"):
        [warning] = check_oidc()
    assert warning.id == "qwenweb.W051" and "cannot be reached within 2 s" in warning.msg
    with override_settings(OIDC_ISSUER=provider.issuer.replace("127.0.0.1", "localhost")):
        [warning] = check_oidc()
    assert "names the issuer" in warning.msg
    # The provider offers offline_access and the scopes do not ask for it: the re-check may not work.
    with override_settings(OIDC_RP_SCOPES="openid email profile"):
        [warning] = check_oidc()
    assert warning.id == "qwenweb.W052" and "does not ask for it" in warning.msg


@pytest.fixture(scope="module")
def tls_provider(tmp_path_factory):
    """A provider over HTTPS, its certificate signed by a CA of the test's own (which no system trusts)."""
    provider = Provider(certificates=make_certificates(tmp_path_factory.mktemp("oidc-tls"))).start()
    yield provider
    provider.close()


def test_a_provider_over_https_is_trusted_through_its_ca_file_only(tls_provider, tmp_path, caplog):
    trusted = app_settings(tls_provider, QWENWEB_OIDC_CA_FILE=str(tls_provider.certificates.ca))
    with override_settings(**trusted):
        assert check_oidc() == []
        assert log_in(tls_provider, "bob")[1]
        result = recheck_oidc()  # the refresh grant and the userinfo, over HTTPS
        assert result.checked >= 1 and not result.failed and not result.disabled
        # Three people between the provider's login page and our callback when the CA stops being trusted.
        waiting = [
            (client, callback_of(to_provider(tls_provider, client, "alice"))) for client in [person() for _ in range(3)]
        ]
        discovered = httpx.get(tls_provider.issuer + "/.well-known/openid-configuration", verify=tls_provider.verify)
    refused = "answers, but its TLS certificate is refused: unable to get local issuer certificate (not signed by "
    # The system's CAs only, then a CA of another office: refused at start-up and at login, never a way in.
    for ca_file, (client, callback) in zip(("", str(make_certificates(tmp_path).ca)), waiting[:2], strict=True):
        with override_settings(**app_settings(tls_provider, QWENWEB_OIDC_CA_FILE=ca_file)):
            [warning] = check_oidc()
            assert warning.id == "qwenweb.W051" and refused in warning.msg, warning.msg
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="chat.web.oidc_views"):
                start = person().get("/oidc/login/")
                assert start.status_code == 503 and UNREACHABLE in start.content.decode()
                response = client.get(callback)  # the discovery document's request, refused by its certificate
            assert response.status_code == 503 and UNREACHABLE in response.content.decode()
            assert "_auth_user_id" not in client.session
            assert caplog.text.count(refused) == 2, caplog.text
            result = recheck_oidc()
            assert refused in result.failed and not result.disabled
    # The four endpoints configured (no discovery): the callback's first call over HTTPS is
    # mozilla-django-oidc's own token request, refused by the certificate, the log naming it and no secret.
    named = {"AUTHORIZATION": "authorization_endpoint", "TOKEN": "token_endpoint", "USERINFO": "userinfo_endpoint"}
    endpoints = {f"QWENWEB_OIDC_{key}_ENDPOINT": discovered.json()[name] for key, name in named.items()}
    endpoints["QWENWEB_OIDC_JWKS_ENDPOINT"] = discovered.json()["jwks_uri"]
    client, callback = waiting[2]
    caplog.clear()
    with (
        override_settings(**app_settings(tls_provider, **endpoints)),
        caplog.at_level(logging.WARNING, logger="chat.web.oidc_views"),
    ):
        response = client.get(callback)
    assert response.status_code == 503 and UNREACHABLE in response.content.decode()
    assert f"{endpoints['QWENWEB_OIDC_TOKEN_ENDPOINT']} {refused}" in caplog.text, caplog.text
    code = parse_qs(urlsplit(callback).query)["code"][0]
    assert code not in caplog.text and CLIENT_SECRET not in caplog.text
