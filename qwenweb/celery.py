import os

from celery import Celery
from celery.signals import worker_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")

app = Celery("qwenweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


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
