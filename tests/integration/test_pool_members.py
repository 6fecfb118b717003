"""A pool's members (the nodes a profile is placed on, and where each is reached): a placement made or
removed, or a node moved, reaches the very next request, with no waiting for a cache to run out.

The main box's node is the real one (the ``llama`` fixture's router serving the default profile); the
second is a Node row reached at the same router, made to serve the pool by a stand-in heartbeat
(``tests/support/stand_in_node.py``): the members are what is under test, not a second llama-server.
"""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings

from monitor.models import Node, Placement, ServerProfile
from monitor.nodes import readiness
from monitor.serving.slot import serving_pool
from tests.support.loops import run
from tests.support.stand_in_node import StandInNode

pytestmark = pytest.mark.usefixtures("redis_server")


@pytest.fixture
def default_pool(llama):
    """The default profile, served on the main box's node."""
    profile = ServerProfile.objects.get(is_default=True)
    assert list(run(serving_pool(profile)).members) == [settings.NODE_NAME]
    return profile


@pytest.fixture
def other_node(default_pool):
    """A second node row reached at the main box's router, beating that it serves the default pool."""
    served = run(readiness.served_on([settings.NODE_NAME], default_pool.name))[settings.NODE_NAME]
    node = Node.objects.create(
        name=f"members-{uuid.uuid4().hex[:6]}", url=settings.LLAMA_SERVER_URL, api_key=settings.LLAMA_API_KEY
    )
    beating = StandInNode(node.name, {default_pool.name: served})
    beating.start()
    yield node
    beating.remove()
    Node.objects.filter(pk=node.pk).delete()


def test_a_placement_made_or_removed_or_a_node_moved_reaches_the_next_request(default_pool, other_node):
    Placement.objects.create(profile=default_pool, node=other_node)
    assert set(run(serving_pool(default_pool)).members) == {settings.NODE_NAME, other_node.name}

    moved = settings.LLAMA_SERVER_URL.rstrip("/").replace("127.0.0.1", "localhost")  # the same router, elsewhere
    assert moved != settings.LLAMA_SERVER_URL.rstrip("/")
    other_node.url = moved
    other_node.save(update_fields=["url"])
    assert run(serving_pool(default_pool)).members[other_node.name][0] == moved

    Placement.objects.filter(profile=default_pool, node=other_node).delete()
    assert list(run(serving_pool(default_pool)).members) == [settings.NODE_NAME]
