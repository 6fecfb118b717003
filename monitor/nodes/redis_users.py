"""Each joined node's own Redis user, made when it joins and deleted when it is removed.

A node's heartbeat and worker log in as ``qwenweb-node-<name>``: every key and channel (they share
the queues and the readiness keys with the main box), every command but Redis's administration
(``@admin``: ACL, CONFIG, SHUTDOWN, DEBUG, CLIENT...) and the flushes. Redis keeps its users in its ACL
file (``var/redis/users.acl``, each password as its SHA-256) through ``ACL SAVE``, so they outlive a
Redis restart and exist from the moment it listens, before any process of ours could re-create them.
Removing a node disables its user, closes its connections and deletes it: the node's heartbeat and
worker are cut off at once.
"""

from __future__ import annotations

import logging
import secrets

import redis

from monitor.redis_clients import sync_client

log = logging.getLogger(__name__)
PREFIX = "qwenweb-node-"


def user_name(node: str) -> str:
    return PREFIX + node


def create(node: str) -> tuple[str, str]:
    """A new user for ``node`` (any old one of that name replaced): (user name, password)."""
    name, password = user_name(node), secrets.token_urlsafe(32)
    sync_client().acl_setuser(
        name, enabled=True, reset=True, passwords=[f"+{password}"], keys=["*"], channels=["*"],
        categories=["+@all", "-@admin"], commands=["-flushall", "-flushdb"],
    )  # fmt: skip
    _save()
    return name, password


def delete(name: str) -> None:
    """Off first (no new login), its connections closed, then gone; a user already gone is no error."""
    client = sync_client()
    client.acl_setuser(name, enabled=False)  # makes a disabled one if it was gone: deleted just below
    client.client_kill_filter(user=name)
    client.acl_deluser(name)
    _save()


def _save() -> None:
    """Into Redis's ACL file; a Redis run without one (an external REDIS_URL) keeps users until it restarts."""
    try:
        sync_client().acl_save()
    except redis.ResponseError as error:
        log.warning("Redis did not save its users (%s): a node's user is lost when that Redis restarts", error)
