"""Group-limited profiles through the running app (Daphne, Redis, the real llama-server): the chat
socket refuses a profile open only to other groups with a message the person reads, in their
language, and counts no turn for it; a member of the group gets the answer started. The API lists
and answers the same way."""

from __future__ import annotations

import uuid

import httpx
import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from chat.accounts import groups
from chat.accounts.groups import GroupSettings
from chat.api.keys import create_key
from chat.models import DailyUsage
from monitor.profiles.selectors import find_profile
from tests.support.client import base_url, chat_socket, events_until, login, make_user, send
from tests.support.hold import queue_slots_held

pytestmark = pytest.mark.usefixtures("web_server")


@pytest.fixture
def default_tied_to_a_group():
    """The default profile open only to a new group (its member given), for this test only."""
    member = make_user()
    profile = find_profile(None)
    group = groups.create_group(
        GroupSettings(f"analysts-{uuid.uuid4().hex[:6]}", None, None, [profile.pk], [member.pk])
    )
    yield profile, member
    Group.objects.filter(pk=group.pk).delete()


def test_the_socket_refuses_a_profile_of_other_groups_and_lets_members_use_it(llama, default_tied_to_a_group):
    profile, member = default_tied_to_a_group
    outsider = make_user()
    with chat_socket(login(outsider)) as ws:
        send(ws, type="send", text="hello", profile=profile.name)
        refused = events_until(ws, "accepted")[-1]
    assert refused["type"] == "error"
    assert refused["message"] == (
        f"The server profile {profile.name} is open only to some groups, and you are in none of them. "
        "Ask a staff member."
    )
    assert not DailyUsage.objects.filter(user=outsider, day=timezone.localdate(), turns__gt=0).exists()
    http = login(outsider)
    http.cookies.set("django_language", "zh-hans")
    with chat_socket(http) as ws:
        send(ws, type="send", text="你好", profile=profile.name)
        refused = events_until(ws, "accepted")[-1]
    assert refused["message"] == f"服务器配置 {profile.name} 仅对部分组开放，而你不在其中任何一个组。请联系工作人员。"
    with queue_slots_held(profile.name, 2), chat_socket(login(member)) as ws:
        send(ws, type="send", text="hello", profile=profile.name)
        accepted = events_until(ws, "accepted")[-1]
        assert accepted["type"] == "accepted"
        send(ws, type="stop", conversation=accepted["conversation"])
        assert events_until(ws)[-1]["status"] == "stopped"


def test_the_api_lists_and_answers_only_the_profiles_of_the_keys_owner(llama, default_tied_to_a_group):
    profile, member = default_tied_to_a_group
    outsider = make_user()
    _row, outsider_key = create_key(outsider, "script")
    _row, member_key = create_key(member, "script")

    def call(key: str, method: str, path: str, **body) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"}
        return httpx.request(method, base_url() + path, headers=headers, json=body or None, timeout=120)

    assert profile.name not in [model["id"] for model in call(outsider_key, "GET", "/v1/models").json()["data"]]
    assert profile.name in [model["id"] for model in call(member_key, "GET", "/v1/models").json()["data"]]
    assert call(outsider_key, "GET", f"/v1/models/{profile.name}").status_code == 404
    question = {"model": profile.name, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    refused = call(outsider_key, "POST", "/v1/chat/completions", **question)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "model_not_permitted"
    assert refused.json()["error"]["message"] == (
        f"The server profile {profile.name} is open only to some groups, and you are in none of them. "
        "Ask a staff member."
    )
    assert call(member_key, "POST", "/v1/chat/completions", **question).status_code == 200
