from celery import shared_task
from django.conf import settings

from chat.services.conversations import mark_orphaned_streams


@shared_task
def sweep_orphaned_streams(older_than_s: float | None = None) -> int:
    """Mark answers orphaned by a crashed web process as incomplete (their text is kept)."""
    if older_than_s is None:
        older_than_s = settings.CHAT_ORPHAN_AFTER_S
    return mark_orphaned_streams(older_than_s)
