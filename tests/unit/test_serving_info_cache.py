"""What the app caches about a served model (slots, context) is keyed on its served id
(``name@revision``); a change of launch options is a new revision, so no process (web,
worker) keeps a reloaded profile's old slot count. The seeded profiles, never saved
through ``save_profile`` before, used to keep their revision on their first change: the
same id then served ``--parallel 1`` while every process's cache still said 2 slots."""

from __future__ import annotations

import asyncio
import uuid

from monitor.llama import serving
from monitor.llama.client import LlamaClient
from monitor.models import Placement, ServerProfile
from monitor.nodes.registry import local_node
from monitor.profiles.options import profile_options
from monitor.profiles.presets import live_id, sections
from monitor.profiles.services import save_profile


class StandInServer(LlamaClient):
    """Stands in for llama-server's ``/props`` (a unit test has no server): the slots each served id has."""

    def __init__(self, model: str, slots_by_id: dict[str, int]):
        super().__init__(base_url="http://127.0.0.1:9", api_key="", model=model)
        self.slots_by_id = slots_by_id
        self.asked = 0

    async def get_json(self, path: str, *args, **kwargs) -> dict:
        assert path == "/props"
        self.asked += 1
        return {"model_alias": self.model, "total_slots": self.slots_by_id[self.model], "n_ctx": 4096}


def seeded_profile(**fields) -> tuple[ServerProfile, Placement]:
    """Like a migration's seeded profile once loaded: saved by the ORM, no recorded revision
    options, its revision 1 live on this box's node (``loading._promote`` records the options it serves with)."""
    profile = ServerProfile(name=f"seeded-{uuid.uuid4().hex[:8]}", model_file="model.gguf", parallel=2, **fields)
    profile.save()
    options = [list(option) for option in profile_options(profile)]
    placement = Placement.objects.create(profile=profile, node=local_node(), live_revision=1, live_options=options)
    return profile, placement


def slots_of(client: LlamaClient) -> int:
    return asyncio.run(serving.serving_info(client)).total_slots


def test_a_seeded_profile_changed_to_one_slot_is_a_new_served_id_with_its_own_cache_entry():
    serving.forget_serving_info()
    profile, placement = seeded_profile()
    before = live_id(profile, placement)
    server = {before: 2}
    assert slots_of(StandInServer(before, server)) == 2  # cached for a minute, under its served id

    profile.parallel = 1
    assert save_profile(profile) is True
    assert profile.revision == 2, "a change of --parallel must make a new revision"
    placement.profile = profile
    assert ("--parallel", "1") in sections(placement)[f"{profile.name}@2"]
    assert ("--parallel", "2") in sections(placement)[before]  # the live one, until the new one loads

    placement.live_revision = profile.revision  # the load went live (loading._promote)
    after = live_id(profile, placement)
    assert after != before
    server[after] = 1  # what the reloaded llama-server reports
    fresh = StandInServer(after, server)
    assert slots_of(fresh) == 1 and fresh.asked == 1  # not the old revision's cached 2
    assert slots_of(StandInServer(after, server)) == 1  # and that answer is cached in turn


def test_saving_a_seeded_profile_unchanged_keeps_its_revision():
    profile, _placement = seeded_profile()
    assert save_profile(profile) is False
    assert profile.revision == 1 and profile.revision_options
    profile.description = "only words changed"
    assert save_profile(profile) is False and profile.revision == 1


def test_a_new_profiles_first_save_is_its_first_revision():
    profile = ServerProfile(name=f"new-{uuid.uuid4().hex[:8]}", model_file="model.gguf")
    assert save_profile(profile) is True and profile.revision == 1
