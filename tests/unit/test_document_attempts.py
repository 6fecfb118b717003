"""A document whose runs keep dying is run again at most DOCUMENT_MAX_ATTEMPTS times, then failed."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from chat.documents import heartbeats, uploads
from chat.models import Document, DocumentPage
from tests.support import client


def stalled(document: Document, status: str) -> None:
    """What a killed worker leaves: the step it was in, an old heartbeat."""
    Document.objects.filter(id=document.id).update(status=status, heartbeat_at=timezone.now() - timedelta(hours=1))


def test_each_run_counts_and_the_last_stall_fails_the_document():
    assert settings.DOCUMENT_MAX_ATTEMPTS == 3
    user = client.make_user()
    document = uploads.create_document(user, None, "notes.txt", b"some words\n")
    for attempt in range(1, 4):
        assert heartbeats.claim(document.id)
        assert Document.objects.get(id=document.id).attempts == attempt
        stalled(document, Document.Status.EXTRACTING)
        if attempt < 3:
            assert heartbeats.claim_stalled(document.id) == Document.Status.EXTRACTING  # queued again
    DocumentPage.objects.create(document=document, number=1, text="half-read")
    # The third run died too: the stall sweep fails it instead of queueing it again.
    assert heartbeats.claim_stalled(document.id) == ""
    document.refresh_from_db()
    assert document.status == Document.Status.FAILED
    assert document.error == "Reading this document stopped 3 times before it finished, so it was given up."
    assert not document.pages.exists() and not uploads.stored_file(document).exists()
    assert str(document.id) not in heartbeats.stalled_documents(0)


def test_a_summary_that_keeps_stalling_keeps_its_done_parts():
    user = client.make_user()
    document = uploads.create_document(user, None, "notes.txt", b"some words\n")
    DocumentPage.objects.create(document=document, number=1, text="read")
    Document.objects.filter(id=document.id).update(attempts=3)
    stalled(document, Document.Status.SUMMARIZING)
    assert heartbeats.claim_stalled(document.id) == ""
    document.refresh_from_db()
    assert document.status == Document.Status.FAILED and document.error.startswith("Reading this document stopped 3")
    assert document.pages.exists()
