"""Groups against the database alone: which profiles a person may use (one selector for the chat page,
its socket and the API), group quotas beside a person's own, and the staff pages that manage groups.
The socket's refusal through the running app is in tests/integration/test_groups.py."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import Group
from django.test import Client, override_settings

from chat.accounts import groups
from chat.accounts.groups import GroupSettings
from chat.accounts.profiles import ProfileRefused, conversation_profile_for, profile_for, profiles_for
from chat.accounts.quotas import QuotaExceeded, check_quota
from chat.accounts.services import set_quotas
from chat.conversations.selectors import current_profile_name, model_names, profile_choices
from chat.models import GroupPolicy
from monitor.models import ServerProfile
from tests.support.client import make_user


def new_profile(**fields) -> ServerProfile:
    return ServerProfile.objects.create(name=f"grp-{uuid.uuid4().hex[:8]}", model_file="model.gguf", **fields)


def new_group(*members, profiles=(), turns=None, tokens=None) -> Group:
    return groups.create_group(
        GroupSettings(
            name=f"group-{uuid.uuid4().hex[:8]}",
            turns_per_day=turns,
            tokens_per_day=tokens,
            profile_ids=[profile.pk for profile in profiles],
            member_ids=[user.pk for user in members],
        )
    )


@pytest.fixture(autouse=True)
def profiles_cleaned():
    yield
    ServerProfile.objects.filter(name__startswith="grp-").delete()


def test_a_profile_tied_to_groups_is_only_for_their_members_and_staff():
    open_profile, analysts_only = new_profile(), new_profile()
    member, outsider, staff = make_user(), make_user(), make_user(is_staff=True)
    new_group(member, profiles=[analysts_only])
    for person in (member, staff):
        assert {open_profile.name, analysts_only.name} <= set(model_names(person.pk))
        assert profile_for(person.pk, analysts_only.name) == analysts_only
    assert open_profile.name in model_names(outsider.pk)
    assert analysts_only.name not in model_names(outsider.pk)
    assert analysts_only.name not in [choice["name"] for choice in profile_choices(outsider.pk)]
    with pytest.raises(ProfileRefused, match="is open only to some groups, and you are in none of them"):
        profile_for(outsider.pk, analysts_only.name)
    # A conversation that picked it falls back to the person's default.
    assert conversation_profile_for(outsider.pk, analysts_only.pk) != analysts_only
    assert conversation_profile_for(member.pk, analysts_only.pk) == analysts_only


def test_the_default_profile_tied_to_a_group_leaves_others_with_another_one():
    default = ServerProfile.objects.get(is_default=True)
    spare = new_profile()
    member, outsider = make_user(), make_user()
    group = new_group(member, profiles=[default])
    try:
        assert profile_for(member.pk) == default
        assert profile_for(outsider.pk) != default
        assert profile_for(outsider.pk) in set(profiles_for(outsider.pk))
        choices = profile_choices(outsider.pk)
        assert current_profile_name(choices, None) in {choice["name"] for choice in choices}
        assert spare in set(profiles_for(outsider.pk))
    finally:
        group.delete()


def test_a_profile_is_open_to_all_again_once_its_group_is_deleted():
    profile, outsider = new_profile(), make_user()
    group = new_group(profiles=[profile])
    assert profile.name not in model_names(outsider.pk)
    groups.delete_group(group.pk)
    assert profile.name in model_names(outsider.pk)
    assert not GroupPolicy.objects.filter(group_id=group.pk).exists()


@override_settings(QUOTA_TURNS_PER_DAY=1)
def test_group_quotas_the_most_generous_applies_and_a_persons_own_figure_overrides():
    in_two, in_none, own = make_user(), make_user(), make_user()
    new_group(in_two, own, turns=2)
    new_group(in_two, turns=3)
    new_group(in_two, own)  # sets no figure: counts for nothing
    for _turn in range(3):
        check_quota(in_two.pk)
    with pytest.raises(QuotaExceeded, match="limit of 3 turns;"):
        check_quota(in_two.pk)
    check_quota(in_none.pk)
    with pytest.raises(QuotaExceeded, match="limit of 1 turn;"):
        check_quota(in_none.pk)
    set_quotas(own.pk, 1, None)
    check_quota(own.pk)
    with pytest.raises(QuotaExceeded, match="limit of 1 turn;"):
        check_quota(own.pk)
    unlimited = make_user()
    new_group(unlimited, turns=0)  # no limit is the most generous of all
    new_group(unlimited, turns=5)
    for _turn in range(6):
        check_quota(unlimited.pk)


def test_directory_memberships_touch_only_the_mapped_groups():
    person = make_user()
    by_hand = new_group(person)
    groups.set_directory_groups(person, ["ldap-analysts"], managed={"ldap-analysts", "ldap-staff"})
    assert set(person.groups.values_list("name", flat=True)) == {by_hand.name, "ldap-analysts"}
    assert GroupPolicy.objects.filter(group__name="ldap-analysts").exists()
    groups.set_directory_groups(person, ["ldap-staff"], managed={"ldap-analysts", "ldap-staff"})
    assert set(person.groups.values_list("name", flat=True)) == {by_hand.name, "ldap-staff"}


def test_staff_manage_groups_on_the_users_page():
    staff, member = make_user(is_staff=True), make_user()
    profile = new_profile()
    page = Client(SERVER_NAME="127.0.0.1")
    page.force_login(staff)
    name = f"Analysts {uuid.uuid4().hex[:6]}"
    made = page.post("/staff/groups/new/", {"name": name}, follow=True)
    assert f"Group {name} created." in made.content.decode()
    group = Group.objects.get(name=name)
    saved = page.post(
        f"/staff/groups/{group.pk}/",
        {"name": name, "turns_per_day": "7", "tokens_per_day": "", "profiles": [profile.pk], "members": [member.pk]},
        follow=True,
    )
    assert f"Group {name} saved." in saved.content.decode()
    assert member.username in saved.content.decode()
    assert list(group.user_set.all()) == [member]
    assert group.policy.turns_per_day == 7 and group.policy.tokens_per_day is None
    assert list(group.policy.profiles.all()) == [profile]
    # Someone not staff cannot add themselves to the group that holds the profile, nor delete it.
    outsider = Client(SERVER_NAME="127.0.0.1")
    outsider.force_login(person := make_user())
    joined = {"name": name, "turns_per_day": "0", "profiles": [profile.pk], "members": [member.pk, person.pk]}
    assert outsider.post(f"/staff/groups/{group.pk}/", joined).status_code == 403
    assert outsider.post(f"/staff/groups/{group.pk}/delete/").status_code == 403
    assert list(group.user_set.all()) == [member] and profile.name not in model_names(person.pk)
    group.policy.refresh_from_db()
    assert group.policy.turns_per_day == 7
    twice = page.post("/staff/groups/new/", {"name": name.upper()}, follow=True)
    assert f"A group named {name.upper()} exists already." in twice.content.decode()
    assert page.post(f"/staff/groups/{group.pk}/delete/", follow=True).status_code == 200
    assert not Group.objects.filter(pk=group.pk).exists()
    assert outsider.post("/staff/groups/new/", {"name": "mine"}).status_code == 403
    assert not Group.objects.filter(name="mine").exists()
