"""The nodes in the database: this box's own, where each is reached, and which profiles each serves.

"Here" is the node this process runs on (``QWENWEB_NODE_NAME``, the host's name by default): the main
box's processes are on its local node, a joined box's on its own. Its llama-server router is reached
at ``LLAMA_SERVER_URL`` with ``LLAMA_API_KEY``; every other node at the address and key it joined with.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet

from monitor.models import Node, Placement, ServerProfile


def local_node() -> Node:
    """The main box's own node, named after the host (renamed when the name changed)."""
    node = Node.objects.filter(is_local=True).first()
    if node is None:
        return Node.objects.create(is_local=True, name=settings.NODE_NAME)
    if node.name != settings.NODE_NAME and not Node.objects.filter(name=settings.NODE_NAME).exists():
        node.name = settings.NODE_NAME
        node.save(update_fields=["name"])
    return node


def this_node() -> Node | None:
    """The node this process runs on."""
    return Node.objects.filter(name=settings.NODE_NAME).first()


def address(node: Node) -> tuple[str, str]:
    """(base URL, API key) of a node's llama-server router."""
    if node.name == settings.NODE_NAME:
        return settings.LLAMA_SERVER_URL.rstrip("/"), settings.LLAMA_API_KEY
    return node.url.rstrip("/"), node.api_key


def placements_here() -> QuerySet[Placement]:
    """The local profiles this node serves, with their profiles."""
    return Placement.objects.filter(node__name=settings.NODE_NAME, profile__remote_url="").select_related(
        "profile", "node"
    )


def placed_revisions_here() -> list[tuple[str, int, int | None]]:
    """(profile name, its current revision, its live revision here) of each local profile placed on this
    node; the heartbeat reads it every beat."""
    return list(placements_here().values_list("profile__name", "profile__revision", "live_revision"))


def placement_here(profile: ServerProfile) -> Placement | None:
    """The profile's placement on this node (None: it is not served here)."""
    return placements_here().filter(profile=profile).first()


def placements_of(profile: ServerProfile) -> list[Placement]:
    """Every node that serves the profile, with its live revision there."""
    return list(Placement.objects.filter(profile=profile).select_related("node"))


def place_here(profile: ServerProfile) -> Placement:
    """Serve a (new) local profile on this node."""
    placement, _created = Placement.objects.get_or_create(profile=profile, node=this_node() or local_node())
    return placement


def node_queue(name: str) -> str:
    """The Celery queue only that node's worker takes: its profile loads and unloads, downloads, self-tests."""
    return f"node.{name}"


def nodes_serving(profile: ServerProfile) -> list[Node]:
    """The nodes the profile is placed on (none for a remote profile)."""
    return [placement.node for placement in placements_of(profile)]


def place_on(profile: ServerProfile, nodes: list[Node]) -> list[Node]:
    """Serve the profile on exactly ``nodes`` (this box's node when none is chosen); returns the nodes it
    left, whose instances the caller unloads."""
    wanted = {node.pk: node for node in nodes} or {(local := this_node() or local_node()).pk: local}
    left = [
        placement.node for placement in profile.placements.select_related("node") if placement.node_id not in wanted
    ]
    profile.placements.exclude(node_id__in=wanted).delete()
    for node in wanted.values():
        Placement.objects.get_or_create(profile=profile, node=node)
    return left
