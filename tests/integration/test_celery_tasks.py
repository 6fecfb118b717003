"""Tasks run by a real Celery worker over the real Redis broker."""

from datetime import timedelta

from django.utils import timezone

from chat.models import Conversation, Message
from chat.tasks import sweep_orphaned_streams
from tests.support.client import make_user


def test_worker_marks_orphaned_streams_incomplete_and_keeps_their_text(celery_worker):
    conversation = Conversation.objects.create(owner=make_user(), title="orphan")
    orphan = Message.objects.create(
        conversation=conversation, role="assistant", content="half an ans", status="streaming"
    )
    live = Message.objects.create(
        conversation=conversation, role="assistant", content="still going", status="streaming"
    )
    Message.objects.filter(id=orphan.id).update(updated_at=timezone.now() - timedelta(hours=1))

    changed = sweep_orphaned_streams.delay(600).get(timeout=30)

    assert changed >= 1
    orphan.refresh_from_db()
    live.refresh_from_db()
    assert orphan.status == "incomplete" and orphan.content == "half an ans"
    assert "interrupted" in orphan.error
    assert live.status == "streaming"
