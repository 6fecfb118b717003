"""Celery's broker transport: kombu's Redis transport, with idle workers that stay idle.

kombu's Redis transport wakes each worker's event loop at least once a second even when no task
comes: its blocking pop (BRPOP) returns empty every ``brpop_timeout`` (1 s) and is sent again,
and a one-second timer checks whether any consumed queue's binding table needs a refresh. With
three workers that is about 2.5 ms of CPU a second on a small box (bench/cpu_bench.py,
``idle_app_cpu_pct``), taken from generation while an answer streams.

Here the pop waits up to ``BRPOP_TIMEOUT_S`` (a task still wakes it at once: Redis answers the
pop the moment something is pushed) and the binding check runs every ``BINDING_CHECK_S``: an idle
worker's loop wakes every 3 s instead of every second, and its CPU fell from about 0.8 to 0.1 ms
a second (a lone worker over 90 s). The pop is not made longer because a worker that stops first
reads its outstanding pop's reply (a task it popped would otherwise be lost): with 10 s, a stop
took 5-8 s against 2 s, with 3 s it takes 2-4 s. The binding check has nothing to do for a queue
that does not expire; for one that does (Celery's remote-control queue), kombu refreshes its
table every 20 minutes or more, and a table lives an hour at least, so a check a minute late is
never too late. A connection that stops answering is still found by kombu's own health check
(``brpop_timeout`` plus ``health_check_interval``).

Only a worker's event loop pops for 3 s. Code that reads a reply queue synchronously (the health
check's ``control.ping`` in the web process, ``manage.py health``) keeps kombu's 1 s: its channel
is closed when the reply window ends, and a close first waits for the outstanding pop, so a 3 s
pop made the check overrun its own time limit and show live workers as down.
"""

from __future__ import annotations

from kombu.transport import redis

# Seconds a worker's pop waits on an empty queue before it is sent again.
BRPOP_TIMEOUT_S = 3
# Seconds between checks of the consumed queues' binding tables (kombu: 1).
BINDING_CHECK_S = 60


class Channel(redis.Channel):
    def _brpop_start(self, timeout=None):
        if timeout is None and self.connection.on_event_loop:
            timeout = BRPOP_TIMEOUT_S
        return super()._brpop_start(timeout)


class Transport(redis.Transport):
    """kombu's Redis transport with the waits above (Celery's ``broker_transport``)."""

    Channel = Channel
    on_event_loop = False  # a worker's consumer: True once it joins the worker's event loop

    def register_with_event_loop(self, connection, loop):
        self.on_event_loop = True
        super().register_with_event_loop(connection, loop)
        cycle = self.cycle  # kombu pinned (requirements.txt); tests/unit/test_idle_wakeups.py reads its timers
        cycle._binding_expiry_tref.cancel()
        cycle._binding_expiry_tref = loop.call_repeatedly(BINDING_CHECK_S, cycle.maybe_refresh_binding_expiry)
