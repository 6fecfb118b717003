"""Who holds a queue's slots: each process, named so that its successor can free what it left.

Every ticket of the fair queue carries its holder: ``<kind>:<host>:<pid>:<start time>``. A process
that starts up (the web server, a Celery worker) gives up the tickets of every process of its own
kind on its host that is gone, at once, instead of after their leases run out: a restarted web
process does not leave the line blocked for ``QWENWEB_QUEUE_LEASE_S``. A pid is only taken for
gone when no process has it with the same start time, so a reused pid is never mistaken.
"""

from __future__ import annotations

import functools
import logging
import os
import socket

import psutil

from monitor.redis_clients import sync_client

log = logging.getLogger(__name__)


def set_process_kind(kind: str) -> None:
    """Name what this process is (``web``, ``worker-documents``...), before it takes any slot; its
    children (a Celery worker's pool) inherit the name."""
    os.environ["QWENWEB_PROCESS_KIND"] = kind
    process_holder.cache_clear()


def _started(pid: int) -> str:
    return f"{psutil.Process(pid).create_time():.2f}"


@functools.cache
def process_holder() -> str:
    """This process's holder name (cached: computed once)."""
    pid = os.getpid()
    kind = os.environ.get("QWENWEB_PROCESS_KIND", "process")
    return f"{kind}:{socket.gethostname()}:{pid}:{_started(pid)}"


def is_gone(holder: str) -> bool:
    """Whether the process a holder name stands for no longer runs (on this host)."""
    try:
        _kind_name, _host, pid, started = holder.rsplit(":", 3)
        return _started(int(pid)) != started
    except (ValueError, psutil.Error):
        return True


def release_gone_predecessors(drop_holder) -> int:
    """Give up the tickets of every process of this one's kind on this host that is gone; returns how
    many tickets were freed. ``drop_holder(holder)`` frees one holder's tickets (the queue's script)."""
    host, me = socket.gethostname(), process_holder()
    kind = me.split(":", 1)[0]
    registry = f"qwenweb:holders:{host}"  # holders seen on the host (the queue's join adds each): holder -> kind
    freed = 0
    for raw_holder, raw_kind in sync_client().hgetall(registry).items():
        holder = raw_holder.decode()
        if raw_kind.decode() != kind or holder == me or not is_gone(holder):
            continue
        freed += drop_holder(holder)
        sync_client().hdel(registry, holder)
    if freed:
        log.warning("freed %d queue slots held by a %s process that is gone", freed, kind)
    return freed
