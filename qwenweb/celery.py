import os

from celery import Celery
from celery.signals import celeryd_init, worker_init, worker_ready

from qwenweb import patches

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")

app = Celery("qwenweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Seconds an idle worker's blocking pop (Redis BRPOP) waits on an empty queue before it is sent
# again (kombu's documented ``polling_interval``; its default: 1). A task still wakes it at once.
# Not longer: a worker that stops first reads its outstanding pop's reply (a task it popped would
# otherwise be lost), so a longer wait makes every stop longer (docs/performance.md).
WORKER_POLL_S = 3


@celeryd_init.connect
def configure_worker(conf, **_kwargs) -> None:
    """A worker's broker connection wakes its event loop as little as it can (bench/patches_bench.py).
    Only a worker's: a synchronous reader (the health check's ``control.ping``) keeps kombu's 1 s
    pop, as closing its channel waits for the outstanding pop (3 s overran the check's limit)."""
    patches.install("worker")
    conf.broker_transport = "qwenweb.patches.broker:Transport"
    conf.broker_transport_options = {**conf.broker_transport_options, "polling_interval": WORKER_POLL_S}


def _kind(worker) -> str:
    return "worker-" + str(worker.hostname).split("@", 1)[0]


@worker_init.connect
def name_worker_processes(sender=None, **_kwargs) -> None:
    """The worker and the pool it forks hold queue slots as ``worker-<name>`` (celery, documents...)."""
    # Imported when the worker starts: this module is imported before Django's apps are ready.
    from monitor.serving.holders import set_process_kind

    set_process_kind(_kind(sender))


@worker_ready.connect
def free_predecessors_slots(sender=None, **_kwargs) -> None:
    """A restarted worker frees the queue slots its killed predecessor held, instead of waiting out their leases."""
    # Imported when the worker is ready: this module is imported before Django's apps are ready.
    from monitor.serving.queue import free_slots_of_gone_predecessors

    free_slots_of_gone_predecessors(_kind(sender))
