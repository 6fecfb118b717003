"""Accounts through the running app (Daphne, Redis, the database, the real llama-server):
sign-up in each mode, approval, invites, disabling, staff password resets, and the daily
quotas refused by name on the chat socket and the OpenAI API."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from chat.accounts import services, signup
from chat.accounts.quotas import add_tokens, check_quota
from chat.api.keys import create_key
from chat.models import Conversation, DailyUsage, Invite
from monitor.profiles.selectors import find_profile
from monitor.public import sync_redis as sync_client
from tests.support.client import base_url, chat_socket, events_until, login, make_user, send
from tests.support.hold import queue_slots_held

pytestmark = pytest.mark.usefixtures("web_server")

PASSWORD = "a-Long-pass-2026"
TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
WAITING = "Your account is waiting for approval by a staff member. Try again once they have approved it."
DISABLED = "Your account is disabled. Ask a staff member to enable it."


@pytest.fixture(autouse=True)
def fresh_signup_state():
    """Sign-up off and no attempts counted for 127.0.0.1 (every test signs up from there)."""

    def clear():
        signup.set_signup_mode("off")
        client = sync_client()
        for key in client.scan_iter("qwenweb:signups:*"):
            client.delete(key)

    clear()
    yield
    clear()


def anonymous(language: str = "en") -> httpx.Client:
    return httpx.Client(base_url=base_url(), follow_redirects=True, timeout=30, headers={"Accept-Language": language})


def post_form(http: httpx.Client, page: str, action: str, data: dict) -> httpx.Response:
    """Submit a form as its page does: the page's CSRF token, the page as Referer."""
    token = TOKEN.search(http.get(page).text).group(1)
    return http.post(action, data={**data, "csrfmiddlewaretoken": token}, headers={"Referer": base_url() + page})


def try_login(username: str, password: str, language: str = "en") -> httpx.Response:
    with anonymous(language) as http:
        response = post_form(http, "/login/", "/login/", {"username": username, "password": password})
        response.logged_in = "sessionid" in http.cookies
        return response


def sign_up(http: httpx.Client, username: str, password: str = PASSWORD, path: str = "/signup/") -> httpx.Response:
    return post_form(http, path, path, {"username": username, "password1": password, "password2": password})


def new_name() -> str:
    return make_user().username + "-new"


def test_sign_up_with_approval_waits_for_staff():
    staff = make_user(is_staff=True)
    staff_http = login(staff)
    saved = post_form(staff_http, "/staff/users/", "/staff/users/signup-mode/", {"mode": "approval"})
    assert "Sign-up mode saved." in saved.text
    name = new_name()
    with anonymous() as http:
        assert 'id="signup-link"' in http.get("/login/").text
        done = sign_up(http, name)
    assert done.status_code == 200 and 'id="signup-pending"' in done.text and "waiting for approval" in done.text
    user = get_user_model().objects.get(username=name)
    assert not user.is_active
    refused = try_login(name, PASSWORD)
    assert WAITING in refused.text and not refused.logged_in
    chinese = try_login(name, PASSWORD, "zh-hans")
    assert "你的账户正在等待管理员审批。" in chinese.text and not chinese.logged_in
    # A wrong password learns nothing about the account.
    wrong = try_login(name, "not-the-password")
    assert "Please try again." in wrong.text and WAITING not in wrong.text and not wrong.logged_in
    page = staff_http.get("/staff/users/").text
    assert f'data-user="{name}" class="pending"' in page
    approved = post_form(staff_http, "/staff/users/", f"/staff/users/{user.pk}/approve/", {})
    assert "Account approved." in approved.text and f'data-user="{name}" class="active"' in approved.text
    user.raw_password = PASSWORD
    assert 'id="composer"' in login(user).get("/").text


def test_users_page_is_for_staff_only():
    assert login(make_user()).get("/staff/users/").status_code == 403
    with anonymous() as http:
        assert http.get("/staff/users/").status_code == 403


def test_sign_up_off_is_closed_and_open_logs_in_at_once_with_password_rules():
    name = new_name()
    with anonymous() as http:
        assert 'id="signup-link"' not in http.get("/login/").text
        assert "Sign-up is closed." in http.get("/signup/").text
        token = TOKEN.search(http.get("/login/").text).group(1)
        refused = http.post(
            "/signup/",
            data={"username": name, "password1": PASSWORD, "password2": PASSWORD, "csrfmiddlewaretoken": token},
            headers={"Referer": base_url() + "/login/"},
        )
    assert refused.status_code == 403 and "Sign-up is closed." in refused.text
    signup.set_signup_mode("open")
    with anonymous() as http:
        weak = sign_up(http, name, "12345678")
        assert weak.status_code == 400 and "This password is entirely numeric." in weak.text
        assert not get_user_model().objects.filter(username=name).exists()
        welcome = sign_up(http, name)
        assert welcome.url.path == "/" and "Welcome! Your account is ready." in welcome.text
        assert 'id="composer"' in welcome.text
    assert get_user_model().objects.get(username=name).is_active


def test_invite_link_signs_up_once_whatever_the_mode_and_expires(web_server):
    staff_http = login(make_user(is_staff=True))
    made = post_form(staff_http, "/staff/users/", "/staff/users/invites/new/", {"note": "for Li"})
    assert made.status_code == 201 and made.headers["Cache-Control"] == "no-store"
    path = re.search(r"/signup/invite/[\w-]+/", made.text).group(0)
    name = new_name()
    with anonymous() as http:
        welcome = sign_up(http, name, path=path)
    assert welcome.url.path == "/" and get_user_model().objects.get(username=name).is_active
    with anonymous() as http:
        again = sign_up(http, new_name(), path=path)
    assert again.status_code == 403
    assert "This invite link was already used or does not exist. Ask staff for a new one." in again.text
    invite, token = signup.create_invite(None)
    Invite.objects.filter(pk=invite.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    with anonymous("zh-hans") as http:
        assert "这个邀请链接已过期。" in http.get(f"/signup/invite/{token}/").text
    # The web server's access log (var/log/web.log under `make run`) saw these requests, not their tokens.
    logged = web_server.log_path.read_text()
    assert "/signup/invite/[redacted]/" in logged
    assert path not in logged and f"/signup/invite/{token}/" not in logged


def test_sign_up_attempts_are_limited_per_address():
    signup.set_signup_mode("open")
    refused = None
    with anonymous() as http:
        # The count is per clock hour: should the hour turn during the loop, the refusal comes
        # within twice as many attempts.
        for attempt in range(21):
            response = sign_up(http, "", "x")
            if response.status_code == 403:
                refused = (attempt, response.text)
                break
            assert response.status_code == 400
    assert refused is not None and refused[0] >= 10
    assert "Too many sign-up attempts from your address: at most 10 an hour. Try again later." in refused[1]


def test_disabled_person_cannot_log_in_and_their_socket_and_keys_stop():
    staff, person = make_user(is_staff=True), make_user()
    _row, key = create_key(person, "script")
    person_http = login(person)
    with chat_socket(person_http) as ws:
        disabled = post_form(login(staff), "/staff/users/", f"/staff/users/{person.pk}/enabled/", {"enabled": "0"})
        assert "Account disabled." in disabled.text
        send(ws, type="send", text="hello")
        assert events_until(ws, "accepted")[-1] == {"type": "error", "message": DISABLED, "conversation": None}
    assert not Conversation.objects.filter(owner=person).exists()
    assert person_http.get("/").url.path == "/login/"  # the session ends with the account
    refused = try_login(person.username, person.raw_password)
    assert DISABLED in refused.text and not refused.logged_in
    api = httpx.post(
        base_url() + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}"},
        json={"model": "chat-8k", "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
    )
    assert api.status_code == 401 and api.json()["error"]["message"] == (
        "The account this API key belongs to is disabled."
    )
    services.set_enabled(staff, person.pk, True)
    login(person).close()


def test_daily_turn_quota_on_the_socket_is_named_in_the_persons_language(llama):
    person = make_user()
    services.set_quotas(person.pk, 1, None)
    with queue_slots_held(find_profile(None).name, 2), chat_socket(login(person)) as ws:
        send(ws, type="send", text="the one turn of today")
        accepted = events_until(ws, "accepted")[-1]
        assert accepted["type"] == "accepted"
        send(ws, type="stop", conversation=accepted["conversation"])
        assert events_until(ws)[-1]["status"] == "stopped"
        send(ws, type="send", text="one more")
        refused = events_until(ws, "accepted")[-1]
    assert refused["message"] == ("You have reached your daily limit of 1 turn; it resets at midnight (server time).")
    assert DailyUsage.objects.get(user=person, day=timezone.localdate()).turns == 1
    # Tokens: a page in Chinese reads its refusal in Chinese.
    other = make_user()
    services.set_quotas(other.pk, None, 50)
    add_tokens(other.pk, 50)
    http = login(other)
    http.cookies.set("django_language", "zh-hans")
    with chat_socket(http) as ws:
        send(ws, type="send", text="hello")
        refused = events_until(ws, "accepted")[-1]
    assert refused["message"] == "你已达到每日 50 个词元的上限；额度在午夜（服务器时间）重置。"


def test_chat_turns_and_api_requests_count_turns_and_tokens(llama):
    person = make_user()
    _row, key = create_key(person, "script")
    with chat_socket(login(person)) as ws:
        send(ws, type="send", text="Say hi.", options={"max_tokens": 4, "seed": 1, "temperature": 0})
        assert events_until(ws)[-1]["status"] == "complete"
    usage = DailyUsage.objects.get(user=person, day=timezone.localdate())
    assert usage.turns == 1 and usage.tokens > 4
    answer = httpx.post(
        base_url() + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}"},
        json={"model": "chat-8k", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
        timeout=120,
    )
    assert answer.status_code == 200
    api_tokens = answer.json()["usage"]["total_tokens"]
    after = DailyUsage.objects.get(pk=usage.pk)
    assert after.turns == 2 and after.tokens == usage.tokens + api_tokens


def test_daily_quota_on_the_api_is_429_in_openai_shape():
    person = make_user()
    _row, key = create_key(person, "script")
    services.set_quotas(person.pk, 1, None)
    check_quota(person.pk)  # today's one turn, spent
    body = {"model": "chat-8k", "messages": [{"role": "user", "content": "hi"}]}
    refused = httpx.post(
        base_url() + "/v1/chat/completions", headers={"Authorization": f"Bearer {key}"}, json=body, timeout=30
    )
    assert refused.status_code == 429
    assert refused.json() == {
        "error": {
            "message": "You have reached your daily limit of 1 turn; it resets at midnight (server time).",
            "type": "insufficient_quota",
            "param": None,
            "code": "daily_turns_exceeded",
        }
    }
    chinese = httpx.post(
        base_url() + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}", "Accept-Language": "zh-hans"},
        json=body,
        timeout=30,
    )
    assert chinese.status_code == 429 and chinese.json()["error"]["message"].startswith("你已达到每日 1 轮的上限")


def test_staff_reset_password_is_shown_once_and_must_be_changed():
    staff, person = make_user(is_staff=True), make_user()
    shown = post_form(login(staff), "/staff/users/", f"/staff/users/{person.pk}/password/", {"password": ""})
    assert shown.headers["Cache-Control"] == "no-store"
    temporary = re.search(r'id="shown-secret-value">([^<]+)<', shown.text).group(1)
    assert not try_login(person.username, person.raw_password).logged_in
    person.raw_password = temporary
    http = login(person)
    assert http.get("/").url.path == "/password/"  # every page leads there until it is changed
    changed = post_form(
        http,
        "/password/",
        "/password/",
        {"old_password": temporary, "new_password1": PASSWORD, "new_password2": PASSWORD},
    )
    assert changed.url.path == "/" and "Your password was changed." in changed.text
    assert http.get("/").url.path == "/"
    assert try_login(person.username, PASSWORD).logged_in
