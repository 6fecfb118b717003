"""What the profile pages poll for (monitor/profiles/overview.py, monitor/web/profile_views.py): whether
anything on them is in motion, and llama-server's status, asked afresh for a page but taken a moment old
for a page's polls, so that tabs following a load cost the router one question every POLL_STATUS_AGE_S."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from monitor.llama.client import LlamaClient
from monitor.models import Event, Placement, ServerProfile
from monitor.nodes.registry import local_node
from monitor.profiles import overview, status
from monitor.profiles.presets import live_id
from tests.support.client import make_user


class StandInRouter(LlamaClient):
    """Stands in for the router's ``/models`` (a unit test has no llama-server), counting the questions."""

    def __init__(self, statuses: dict[str, dict]):
        super().__init__(base_url="http://127.0.0.1:9", api_key="", model="")
        self.statuses = statuses
        self.asked = 0

    async def list_models(self, *, reload: bool = False) -> list[dict]:
        self.asked += 1
        return [{"id": model_id, "status": value} for model_id, value in self.statuses.items()]


@pytest.fixture
def profile():
    profile = ServerProfile.objects.create(name=f"motion-{uuid.uuid4().hex[:8]}", model_file="model.gguf")
    Placement.objects.create(profile=profile, node=local_node(), live_revision=profile.revision)
    yield profile
    profile.delete()


@pytest.fixture
def router(monkeypatch, profile):
    """Every node's router, as the profile pages ask them (one stand-in: one cached answer)."""
    placement = Placement.objects.get(profile=profile)
    stand_in = StandInRouter({live_id(profile, placement): {"value": "loaded"}})
    monkeypatch.setattr(overview, "node_client", lambda node, model: stand_in)
    status.forget_status()
    yield stand_in
    status.forget_status()


def staff_client() -> Client:
    client = Client(SERVER_NAME="127.0.0.1")
    client.force_login(make_user(is_staff=True))
    return client


def test_polls_take_a_moment_old_answer_and_pages_ask_afresh(router, profile):
    client = staff_client()
    # A page (the one drawn after an action) asks afresh; its answer then serves the polls.
    assert client.get("/monitor/profiles/").status_code == 200
    asked = router.asked
    assert asked > 0
    for _ in range(3):
        body = client.get("/monitor/profiles/status.json").json()
    assert router.asked == asked, "each poll asked llama-server again"
    assert {"state": "loaded", "name": profile.name}.items() <= next(
        p for p in body["profiles"] if p["id"] == profile.pk
    ).items()
    assert body["in_motion"] is False
    for url, (at, statuses) in list(status._status_cache.items()):
        status._status_cache[url] = (at - overview.POLL_STATUS_AGE_S, statuses)
    client.get("/monitor/profiles/status.json")
    assert router.asked > asked, "an answer older than POLL_STATUS_AGE_S served a poll"


def test_one_profile_page_follows_that_profile_with_its_log(router, profile):
    body = staff_client().get(f"/monitor/profiles/status.json?profile={profile.pk}").json()
    assert [p["id"] for p in body["profiles"]] == [profile.pk]
    assert "log_tail" in body["profiles"][0]
    assert staff_client().get("/monitor/profiles/status.json?profile=x1").status_code == 404


def payload(profile_id: int, state: str, event: Event | None = None) -> dict:
    last = {"kind": event.kind, "at": event.created_at} if event else None
    return {"id": profile_id, "state": state, "last_event": last}


def test_what_is_in_motion():
    assert not overview.in_motion([payload(1, "loaded"), payload(2, "unloaded"), payload(3, "failed")], {})
    assert overview.in_motion([payload(1, "loaded"), payload(2, "loading")], {})
    assert overview.in_motion([payload(1, "down")], {})  # the watchdog is bringing llama-server back


def test_a_started_load_is_in_motion_until_its_event(profile):
    started = {str(profile.pk): overview.started_action("load")}
    before = Event.objects.create(kind=Event.Kind.PROFILE_LOADED, profile=profile.name, message="earlier")
    Event.objects.filter(pk=before.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    before.refresh_from_db()
    # Queued, not yet run by the worker: the profile still looks settled, its last event is older.
    assert overview.in_motion([payload(profile.pk, "loaded", before)], started)
    assert overview.in_motion([payload(profile.pk, "loading", before)], started)
    done = Event.objects.create(kind=Event.Kind.PROFILE_FAILED, profile=profile.name, message="failed")
    assert not overview.in_motion([payload(profile.pk, "failed", done)], started)
    # Another admin's action, or a profile this admin did not touch, is not followed.
    assert not overview.in_motion([payload(profile.pk + 1, "loaded", before)], started)


def test_a_load_that_ended_loaded_is_followed_until_the_page_shows_it(profile):
    """A poll reads the load's event fresh but the router's answer up to POLL_STATUS_AGE_S old: a load that
    ended within that moment is still followed, or the page would stop on the state from before it."""
    started = {str(profile.pk): overview.started_action("load")}
    loaded = Event.objects.create(kind=Event.Kind.PROFILE_LOADED, profile=profile.name, message="loaded")
    assert overview.in_motion([payload(profile.pk, "unloaded", loaded)], started)
    assert not overview.in_motion([payload(profile.pk, "loaded", loaded)], started)
    assert not overview.in_motion([payload(profile.pk, "sleeping", loaded)], started)


def test_a_started_unload_is_in_motion_until_the_instance_is_gone(profile):
    started = {str(profile.pk): overview.started_action("unload")}
    assert overview.in_motion([payload(profile.pk, "loaded")], started)
    assert not overview.in_motion([payload(profile.pk, "unloaded")], started)


def test_an_action_whose_task_never_ran_is_given_up(profile):
    stale = {"kind": "load", "at": time.time() - overview.watch_limit_s() - 1}
    assert not overview.in_motion([payload(profile.pk, "loaded")], {str(profile.pk): stale})
    assert overview.current_actions({str(profile.pk): stale, "7": overview.started_action("unload")}).keys() == {"7"}
