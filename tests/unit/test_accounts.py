"""Account rules against the database alone: sign-up modes, invites, approval, staff actions,
and the daily quotas' counting. The same rules through the running app are in
tests/integration/test_accounts.py."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.accounts import services, signup
from chat.accounts.quotas import AccountDisabled, QuotaExceeded, account_of, add_tokens, check_quota
from chat.conversations.services import answer_tokens
from chat.conversations.turns import TurnRunner
from chat.errors import ChatError
from chat.models import Account, Conversation, DailyUsage, Invite, Message, SignupSettings
from tests.support.client import make_user

PASSWORD = "a-Long-pass-2026"


def new_name() -> str:
    return make_user().username + "-new"


@pytest.fixture(autouse=True)
def mode_off():
    signup.set_signup_mode(SignupSettings.Mode.OFF)
    yield
    signup.set_signup_mode(SignupSettings.Mode.OFF)


def test_the_mode_decides_what_a_sign_up_makes():
    assert signup.signup_mode() == "off"
    with pytest.raises(signup.SignupRefused, match="Sign-up is closed"):
        signup.sign_up(new_name(), PASSWORD)
    signup.set_signup_mode("approval")
    pending = signup.sign_up(new_name(), PASSWORD)
    assert not pending.is_active and pending.account.approval == Account.Approval.PENDING
    signup.set_signup_mode("open")
    active = signup.sign_up(new_name(), PASSWORD)
    assert active.is_active and active.account.approval == Account.Approval.APPROVED
    with pytest.raises(ChatError):
        signup.set_signup_mode("everyone")


def test_an_invite_works_once_whatever_the_mode_and_only_its_hash_is_kept():
    staff = make_user(is_staff=True)
    invite, token = signup.create_invite(staff, "for Li")
    assert token not in invite.token_hash and len(invite.token_hash) == 64
    user = signup.sign_up(new_name(), PASSWORD, token)
    assert user.is_active
    invite.refresh_from_db()
    assert invite.used_at is not None and invite.used_by == user
    with pytest.raises(signup.SignupRefused, match="already used"):
        signup.sign_up(new_name(), PASSWORD, token)
    with pytest.raises(signup.SignupRefused, match="already used"):
        signup.sign_up(new_name(), PASSWORD, token + "x")


def test_an_expired_invite_is_refused_and_makes_no_account():
    invite, token = signup.create_invite(make_user(is_staff=True))
    Invite.objects.filter(pk=invite.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    name = new_name()
    with pytest.raises(signup.SignupRefused, match="expired"):
        signup.sign_up(name, PASSWORD, token)
    assert not get_user_model().objects.filter(username=name).exists()


def test_approve_reject_and_the_login_refusal():
    signup.set_signup_mode("approval")
    first, second = signup.sign_up(new_name(), PASSWORD), signup.sign_up(new_name(), PASSWORD)
    assert "waiting for approval" in services.login_refusal(first)
    services.approve(first.pk)
    first.refresh_from_db()
    assert first.is_active and first.account.approval == Account.Approval.APPROVED
    with pytest.raises(ChatError, match="Only an account waiting"):
        services.reject(first.pk)
    assert services.reject(second.pk) == second.username
    assert not get_user_model().objects.filter(pk=second.pk).exists()


def test_disable_is_refused_for_oneself_and_pending_accounts():
    staff, person = make_user(is_staff=True), make_user()
    with pytest.raises(ChatError, match="your own account"):
        services.set_enabled(staff, staff.pk, False)
    services.set_enabled(staff, person.pk, False)
    person.refresh_from_db()
    assert not person.is_active
    assert services.login_refusal(person) == "Your account is disabled. Ask a staff member to enable it."
    with pytest.raises(AccountDisabled, match="disabled"):
        check_quota(person.pk)


def test_a_reset_password_is_validated_and_must_be_changed():
    staff, person = make_user(is_staff=True), make_user()
    with pytest.raises(ChatError, match="too short"):
        services.reset_password(staff, person.pk, "short")
    generated = services.reset_password(staff, person.pk)
    person.refresh_from_db()
    assert len(generated) >= 12 and person.check_password(generated)
    assert services.must_change_password(person)
    services.password_changed(person)
    assert not services.must_change_password(person)


def test_only_a_superuser_resets_or_disables_a_superuser():
    """Staff without the superuser flag cannot take over (or lock out) the Django admin's superuser."""
    staff = make_user(is_staff=True)
    admin, other_admin = make_user(is_staff=True, is_superuser=True), make_user(is_staff=True, is_superuser=True)
    with pytest.raises(ChatError, match="Only a superuser"):
        services.set_enabled(staff, admin.pk, False)
    with pytest.raises(ChatError, match="Only a superuser"):
        services.reset_password(staff, admin.pk)
    admin.refresh_from_db()
    assert admin.is_active and admin.check_password(admin.raw_password)
    assert not services.must_change_password(admin)
    assert services.reset_password(other_admin, admin.pk)  # a superuser may
    services.set_enabled(other_admin, admin.pk, False)


def test_turn_quota_counts_each_turn_and_refuses_the_one_over():
    person = make_user()
    services.set_quotas(person.pk, 2, None)
    check_quota(person.pk)
    check_quota(person.pk)
    with pytest.raises(QuotaExceeded) as refused:
        check_quota(person.pk)
    assert str(refused.value) == ("You have reached your daily limit of 2 turns; it resets at midnight (server time).")
    assert refused.value.code == "daily_turns_exceeded"
    assert DailyUsage.objects.get(user=person, day=timezone.localdate()).turns == 2
    assert account_of(person.pk).last_turn_at is not None
    # Yesterday's turns do not count today.
    DailyUsage.objects.filter(user=person).update(day=timezone.localdate() - timedelta(days=1))
    check_quota(person.pk)


def test_token_quota_lets_the_crossing_turn_finish_and_refuses_the_next():
    person = make_user()
    services.set_quotas(person.pk, None, 100)
    check_quota(person.pk)
    add_tokens(person.pk, 99)
    check_quota(person.pk)
    add_tokens(person.pk, 50)
    with pytest.raises(QuotaExceeded, match="daily limit of 100 tokens") as refused:
        check_quota(person.pk)
    assert refused.value.code == "daily_tokens_exceeded"


@override_settings(QUOTA_TURNS_PER_DAY=1)
def test_the_default_quota_applies_unless_the_person_has_their_own_and_zero_is_no_limit():
    person, other = make_user(), make_user()
    check_quota(person.pk)
    with pytest.raises(QuotaExceeded, match="limit of 1 turn;"):
        check_quota(person.pk)
    services.set_quotas(other.pk, 0, None)
    for _turn in range(3):
        check_quota(other.pk)


def test_a_turn_is_one_read_and_one_write_and_the_last_turn_is_stamped_once_a_minute():
    """Every chat turn and API call checks the quota before its request (time its person waits for the
    first token): the account, its quotas and today's usage in one read, then the turn counted; the
    last turn (shown to the minute on the people page) is stamped when a minute has passed."""
    person = make_user()
    check_quota(person.pk)  # the first turn makes the account and today's row, and stamps the turn
    stamped = account_of(person.pk).last_turn_at
    with CaptureQueriesContext(connection) as second:
        check_quota(person.pk)
    assert len(second.captured_queries) == 2
    assert account_of(person.pk).last_turn_at == stamped
    Account.objects.filter(user=person).update(last_turn_at=stamped - timedelta(seconds=61))
    with CaptureQueriesContext(connection) as later:
        check_quota(person.pk)
    assert len(later.captured_queries) == 3
    assert account_of(person.pk).last_turn_at > stamped
    with CaptureQueriesContext(connection) as counted:
        add_tokens(person.pk, 7)
    assert len(counted.captured_queries) == 1
    assert DailyUsage.objects.get(user=person, day=timezone.localdate()).tokens == 7
    assert DailyUsage.objects.get(user=person, day=timezone.localdate()).turns == 3


def test_tokens_of_an_answer_that_ends_on_a_new_day_count_on_that_day():
    person = make_user()
    check_quota(person.pk)
    DailyUsage.objects.filter(user=person).update(day=timezone.localdate() - timedelta(days=1))
    add_tokens(person.pk, 5)
    assert DailyUsage.objects.get(user=person, day=timezone.localdate()).tokens == 5
    assert DailyUsage.objects.get(user=person, day=timezone.localdate() - timedelta(days=1)).tokens == 0


@pytest.mark.parametrize("name", ["signup", "signup_pending", "password_change", "users", "_fields"])
def test_account_templates_compile(name):
    from django.template.loader import get_template

    get_template(f"accounts/{name}.html")
    get_template("registration/login.html")


def test_answer_tokens_count_the_whole_prompt_and_estimate_a_stopped_answer():
    assert answer_tokens("x", "", {"prompt_tokens": 10, "cached_tokens": 30, "output_tokens": 5}) == 45
    assert answer_tokens("x" * 400, "y" * 40, {}) == 110
    assert answer_tokens("", "", None) == 0


def test_an_answer_whose_conversation_was_deleted_meanwhile_still_counts_its_tokens():
    """Deleting the conversation before its answer ends must not make the answer's tokens free:
    the runner names the owner, as the deleted message can no longer say whose it was."""
    person = make_user()
    conversation = Conversation.objects.create(owner=person)
    answer = Message.objects.create(conversation=conversation, role="assistant", status="streaming")
    sent: list[dict] = []

    async def send(event: dict) -> None:
        sent.append(event)

    runner = TurnRunner(conversation=conversation, assistant_id=answer.id, user_key=str(person.pk), send=send)
    runner.content.append("x" * 400)  # streamed live to the page, then the conversation was deleted
    Conversation.objects.filter(pk=conversation.pk).delete()
    asyncio.run(runner._finish(Message.Status.STOPPED, ""))
    assert sent[-1]["type"] == "done"
    assert DailyUsage.objects.get(user=person, day=timezone.localdate()).tokens == answer_tokens("x" * 400, "", {})


def test_the_users_page_names_the_refusal_and_a_superuser_may_reset():
    staff, admin = make_user(is_staff=True), make_user(is_staff=True, is_superuser=True)
    page = Client(SERVER_NAME="127.0.0.1")
    page.force_login(staff)
    refused = page.post(f"/staff/users/{admin.pk}/password/", {"password": ""}, follow=True)
    assert "Only a superuser can change a superuser&#x27;s account." in refused.content.decode()
    assert "shown-secret-value" not in refused.content.decode()
    admin.refresh_from_db()
    assert admin.check_password(admin.raw_password)
    page.force_login(make_user(is_staff=True, is_superuser=True))
    shown = page.post(f"/staff/users/{admin.pk}/password/", {"password": ""})
    assert shown.status_code == 200 and "shown-secret-value" in shown.content.decode()
