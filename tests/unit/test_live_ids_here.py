"""The heartbeat's read of what this node should serve (``live_ids_here``, one query a beat)
says what ``live_id`` says of each placement here: the live revision once one loaded, the
current one before; remote profiles and other nodes' placements left out."""

from __future__ import annotations

import uuid

from monitor.models import Node, Placement, ServerProfile
from monitor.nodes.registry import local_node, placements_here
from monitor.profiles.presets import live_id, live_ids_here


def profile(**fields) -> ServerProfile:
    return ServerProfile.objects.create(name=f"here-{uuid.uuid4().hex[:8]}", model_file="model.gguf", **fields)


def test_live_ids_here_agree_with_live_id_and_follow_a_change():
    here = local_node()
    elsewhere = Node.objects.create(name=f"other-{uuid.uuid4().hex[:6]}", url="http://127.0.0.1:9")
    never_loaded = profile(revision=3)
    Placement.objects.create(profile=never_loaded, node=here)
    went_live = profile(revision=5)
    live_placement = Placement.objects.create(profile=went_live, node=here, live_revision=4)
    remote = profile(remote_url="http://127.0.0.1:9/v1")
    Placement.objects.create(profile=remote, node=here)
    Placement.objects.create(profile=profile(), node=elsewhere)

    ids = live_ids_here()
    assert ids == {placement.profile.name: live_id(placement.profile, placement) for placement in placements_here()}
    assert ids[never_loaded.name] == f"{never_loaded.name}@3"
    assert ids[went_live.name] == f"{went_live.name}@4"
    assert remote.name not in ids

    # Read again (the compiled query run anew): a revision that went live, a placement taken away.
    Placement.objects.filter(pk=live_placement.pk).update(live_revision=5)
    Placement.objects.filter(profile=never_loaded).delete()
    ids = live_ids_here()
    assert ids[went_live.name] == f"{went_live.name}@5"
    assert never_loaded.name not in ids
