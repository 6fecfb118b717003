"""The usage ledger's Celery task (its name pinned as ``chat.tasks.<function>``, see chat.tasks)."""

from celery import shared_task
from django.conf import settings

from chat.usage import services as usage


@shared_task(name="chat.tasks.prune_usage_ledger")
def prune_usage_ledger() -> int:
    """Delete the usage ledger's rows older than QWENWEB_USAGE_RETENTION_DAYS, in batches."""
    return usage.delete_older_than(settings.USAGE_RETENTION_DAYS)
