"""Writes for inference nodes: join tokens, joins, registrations, removals (docs/nodes.md).

A join token is shown once; only its SHA-256 is kept, and the one a node brings is found by comparing
hashes in constant time. A join spends its token with one conditional UPDATE (two joins with one token
cannot both succeed) and, in the same transaction, makes the node: a new llama-server API key for its
router (kept, as the app needs it to reach the router; never shown to a browser), a credential the
node proves itself with later (only its hash kept), its own Redis user and its database access. Every
refusal is a ``NodeRefused`` whose message the node prints, recorded on the timeline (NODE_REFUSED:
which name, from which address, why) for the staff page. Removing a node takes all of it back.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from monitor import timeline
from monitor.models import Event, JoinToken, Node
from monitor.nodes import database_roles, readiness, redis_users
from monitor.nodes.registry import local_node, node_queue, this_node
from monitor.nodes.selectors import redis_loopback_only
from monitor.redis_clients import count_in_window, sync_client

LOOPBACK = ("127.0.0.1", "localhost", "::1")
# Why a node was refused, by code: the timeline keeps the code, the staff page says it in its reader's language.
REFUSALS = {
    "unknown_token": gettext_lazy("This join token is not known here. Ask staff for a new one (the Nodes page)."),
    "used_token": gettext_lazy("This join token was already used. Ask staff for a new one (the Nodes page)."),
    "expired_token": gettext_lazy("This join token has expired. Ask staff for a new one (the Nodes page)."),
    "revoked_token": gettext_lazy("This join token was revoked by staff. Ask staff for a new one (the Nodes page)."),
    "name_taken": gettext_lazy(
        "A node named %(name)s already exists. Start this one with another NAME, or remove the other on the "
        "Nodes page first."
    ),
    "sqlite": gettext_lazy(
        "The main box keeps its database in SQLite, which only a node on the same machine can share. Move it "
        "to PostgreSQL before other boxes can join."
    ),
    "redis_loopback": gettext_lazy(
        "The main box's Redis listens on this machine only (%(bind)s). Set QWENWEB_REDIS_BIND to its LAN "
        "address there and restart it before other boxes can join."
    ),
    "redis_refused": gettext_lazy("The main box's Redis did not let it add a user for this node: %(error)s"),
    "removed": gettext_lazy(
        "The main box has no node %(name)s with this credential: it was removed on the Nodes page. Ask staff "
        "for a new join token and start the node again with it."
    ),
    "invalid": gettext_lazy("The request was not valid: %(error)s"),
    "too_many": gettext_lazy("Too many join attempts from this address: at most %(count)d an hour. Try again later."),
}


class NodeRefused(Exception):
    """A join, registration or check refused; ``str()`` is the reason in the active language."""

    def __init__(self, reason: str, **params):
        self.reason, self.params = reason, params
        super().__init__(refusal_text(reason, params))


class NodeError(Exception):
    """A staff action on nodes that cannot be done (the message says why)."""


def refusal_text(reason: str, params: dict) -> str:
    return str(REFUSALS.get(reason, REFUSALS["invalid"])) % {"name": "", "error": "", **params}


def refuse(reason: str, *, name: str, address: str, **params) -> NodeRefused:
    """The refusal, recorded on the timeline (in the box's own language; the page says it in its reader's)."""
    with translation.override(settings.LANGUAGE_CODE):
        message = _("%(name)s from %(address)s was refused: %(why)s") % {
            "name": name or "?", "address": address, "why": refusal_text(reason, {"name": name, **params}),
        }  # fmt: skip
    details = {"address": address, "reason": reason, "params": {key: str(value) for key, value in params.items()}}
    timeline.record(Event.Kind.NODE_REFUSED, message, level=Event.Level.WARNING, node=name[:48], **details)
    return NodeRefused(reason, name=name, **params)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def count_attempt(address: str) -> None:
    """NodeRefused once an address made NODE_JOINS_PER_HOUR attempts this clock hour (joins, and calls
    that failed)."""
    attempts = count_in_window(f"qwenweb:node-joins:{address}", 3600)
    limit = settings.NODE_JOINS_PER_HOUR
    if attempts == limit + 1:  # recorded once an hour: a flood of attempts does not flood the timeline
        raise refuse("too_many", name="", address=address, count=limit)
    if attempts > limit:
        raise NodeRefused("too_many", count=limit)


# ---------------------------------------------------------------------------------------------- tokens


def create_token(staff, note: str = "", hours: int | None = None) -> tuple[JoinToken, str]:
    """A new join token and its secret (never available again)."""
    token = "qwn-join-" + secrets.token_urlsafe(32)
    row = JoinToken.objects.create(
        token_hash=_digest(token),
        note=note.strip()[:200],
        created_by=staff,
        expires_at=timezone.now() + timedelta(hours=hours or settings.NODE_TOKEN_HOURS),
    )
    return row, token


def revoke_token(token_id: int) -> None:
    JoinToken.objects.filter(pk=token_id, used_at__isnull=True, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )


def _token_for(token: str) -> JoinToken | None:
    """The stored token whose hash is this one's, compared in constant time (no early answer by prefix)."""
    wanted = _digest(token)
    found = None
    for row in JoinToken.objects.all():
        if hmac.compare_digest(row.token_hash, wanted):
            found = row
    return found


def _usable_token(token: str, name: str, address: str) -> JoinToken:
    row = _token_for(token)
    if row is None:
        raise refuse("unknown_token", name=name, address=address)
    if row.revoked_at is not None:
        raise refuse("revoked_token", name=name, address=address)
    if row.used_at is not None:
        raise refuse("used_token", name=name, address=address)
    if row.expires_at <= timezone.now():
        raise refuse("expired_token", name=name, address=address)
    return row


# ------------------------------------------------------------------------------------------------ join


def reach_host(own: str, node_side: str) -> str:
    """The host a node reaches one of this box's services at: the host it reached the main box at,
    when the service's own address is this box's loopback."""
    return node_side if own in LOOPBACK else own


def _redis_address(host: str) -> dict:
    url = sync_client().connection_pool.connection_kwargs
    return {
        "host": reach_host(url.get("host", "127.0.0.1"), host),
        "port": url.get("port", 6379),
        "db": url.get("db", 0),
    }


def _check_reachable(name: str, address: str) -> None:
    """Refused: a box other than this one cannot reach the database or Redis this box keeps to itself."""
    if address in LOOPBACK or address in settings.QWENWEB_LAN_ADDRESSES:
        return
    if database_roles.access() == "sqlite":
        raise refuse("sqlite", name=name, address=address)
    if redis_loopback_only():
        raise refuse("redis_loopback", name=name, address=address, bind=settings.REDIS_BIND)


def join(token: str, name: str, url: str, facts: dict, *, address: str, host: str) -> dict:
    """A node joins: its row, credentials, Redis user and database access; what it needs to run. ``address``:
    where the request came from; ``host``: the main box's host as the node reached it."""
    row = _usable_token(token, name, address)
    if Node.objects.filter(name=name).exists():
        raise refuse("name_taken", name=name, address=address)
    _check_reachable(name, address)
    credential, api_key = "qwn-node-" + secrets.token_urlsafe(32), "sk-node-" + secrets.token_urlsafe(32)
    try:
        redis_user, redis_password = redis_users.create(name)
    except redis.RedisError as error:  # an external Redis that gives the app no ACL rights
        raise refuse("redis_refused", name=name, address=address, error=str(error)[:200]) from error
    try:
        with transaction.atomic():
            node = Node.objects.create(
                name=name, url=url, api_key=api_key, credential_hash=_digest(credential), redis_user=redis_user,
                facts=facts, registered_at=timezone.now(),
            )  # fmt: skip
            spent = JoinToken.objects.filter(
                pk=row.pk, used_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now()
            ).update(used_at=timezone.now(), node=node)
            if not spent:  # another join took it a moment ago
                raise refuse("used_token", name=name, address=address)
            database = database_roles.grant(name, host)
    except BaseException:
        redis_users.delete(redis_user)
        raise
    timeline.record(
        Event.Kind.NODE_JOINED, _("Node %(name)s joined from %(address)s.") % {"name": name, "address": address},
        node=name, address=address, url=url,
    )  # fmt: skip
    return {
        "name": name,
        "credential": credential,
        "llama_api_key": api_key,
        "redis": {**_redis_address(host), "username": redis_user, "password": redis_password},
        "database": database,
    }


def authenticated(name: str, credential: str, address: str) -> Node:
    """The node this credential proves, or NodeRefused (recorded): it was removed, or never was."""
    node = Node.objects.filter(name=name, is_local=False).first()
    known = node.credential_hash if node is not None else "0" * 64
    if not hmac.compare_digest(known, _digest(credential or "")) or node is None:
        count_attempt(address)
        raise refuse("removed", name=name, address=address)
    return node


def register(node: Node, url: str, facts: dict, *, host: str) -> dict:
    """A node's start: its facts and address as it says now; where its Redis and database are now."""
    node.url, node.facts, node.registered_at = url, facts, timezone.now()
    node.save(update_fields=["url", "facts", "registered_at"])
    timeline.record(Event.Kind.NODE_UP, _("Node %(name)s started.") % {"name": node.name}, node=node.name, url=url)
    return {"name": node.name, "redis": _redis_address(host), "database": database_roles.address(host)}


def register_local(facts: dict) -> Node:
    """The main box's own node (``make run``): its facts, straight into its row."""
    node = this_node() or local_node()
    node.facts, node.registered_at = facts, timezone.now()
    node.save(update_fields=["facts", "registered_at"])
    return node


# --------------------------------------------------------------------------------------------- removal


def remove(node: Node) -> None:
    """Take back everything the node was given: its Redis user (its connections closed at once), its
    database role, its API key and credential (the row), its pending jobs; out of every pool now."""
    if node.is_local:
        raise NodeError(_("This box's own node cannot be removed."))
    if node.redis_user:
        redis_users.delete(node.redis_user)
    client = sync_client()
    client.delete(
        readiness.ready_key(node.name), readiness.beat_key(node.name), readiness.recover_key(node.name),
        node_queue(node.name),
    )  # fmt: skip
    with transaction.atomic():
        database_roles.revoke(node.name)
        node.delete()
    timeline.record(Event.Kind.NODE_LEFT, _("Node %(name)s was removed.") % {"name": node.name}, node=node.name)
