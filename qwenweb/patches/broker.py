"""A Celery worker's broker transport: kombu's Redis transport without its once-a-second binding check.

An idle worker's event loop wakes for two things kombu does every second: its blocking pop
(BRPOP) returning empty, and a timer checking whether a consumed queue's binding table needs a
refresh. The pop's wait is kombu's documented ``polling_interval`` transport option, set for
workers in `qwenweb.celery`; the timer has no option (kombu 5.7 starts it at 1 s in
``register_with_event_loop``), so this transport restarts it every ``BINDING_CHECK_S``. The check
has nothing to do for a queue that does not expire; for one that does (Celery's remote-control
queue), kombu refreshes its table every 20 minutes or more and a table lives an hour at least, so
a check a minute late is never too late. `qwenweb.celery` makes it a worker's transport.

Gain, bench/patches_bench.py (the runs in docs/performance.md): an idle worker wakes about 0.45
times a second instead of about 1.45 with the documented option alone, and spends about 0.2 ms of
CPU a second instead of about 0.45. The product runs three workers.
"""

from __future__ import annotations

from kombu.transport import redis

from qwenweb.patches.guard import Patch

PATCH = Patch(
    "broker",
    versions={"kombu": "5.7.0"},
    touches={
        "kombu": (
            "kombu.transport.redis:Transport.__init__>cycle",
            "kombu.transport.redis:Transport.register_with_event_loop>_binding_expiry_tref",
            "kombu.transport.redis:MultiChannelPoller.maybe_refresh_binding_expiry",
        )
    },
)

# Seconds between checks of the consumed queues' binding tables (kombu: 1).
BINDING_CHECK_S = 60


class Transport(redis.Transport):
    """kombu's Redis transport with the binding check above (a worker's ``broker_transport``)."""

    def register_with_event_loop(self, connection, loop):
        super().register_with_event_loop(connection, loop)
        cycle = self.cycle
        cycle._binding_expiry_tref.cancel()
        cycle._binding_expiry_tref = loop.call_repeatedly(BINDING_CHECK_S, cycle.maybe_refresh_binding_expiry)


def apply() -> None:
    """Nothing to replace: `qwenweb.celery` names ``Transport`` as a worker's broker transport."""
