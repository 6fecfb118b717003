"""A worker run's hold on a document: it claims the document, records a heartbeat while it works
and reads the person's cancel with it; documents whose heartbeat stopped (their worker was killed)
are found and run again, or given up after DOCUMENT_MAX_ATTEMPTS runs."""

from __future__ import annotations

import time
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import ngettext

from chat.documents.services import fail_reading, stop_summary
from chat.documents.uploads import stored_file
from chat.models import Document

HEARTBEAT_S = 2.0  # how often a run records that it is alive (CLAIM_AFTER_S is three of these)
CLAIM_AFTER_S = 6.0  # three missed heartbeats


def claim(document_id) -> bool:
    """Take the document for this run; False while another live run holds it (its heartbeat is fresh)."""
    cutoff = timezone.now() - timedelta(seconds=CLAIM_AFTER_S)
    fresh = Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=cutoff)
    return bool(
        Document.objects.filter(fresh, id=document_id).update(heartbeat_at=timezone.now(), attempts=F("attempts") + 1)
    )


def still_wanted(document_id) -> bool:
    """False when the user asked to cancel or deleted the document (a read: asked often)."""
    return Document.objects.filter(id=document_id, cancel_requested=False).exists()


def heartbeat(document_id, **fields) -> bool:
    """Record progress; False when the user asked to cancel or deleted the document."""
    Document.objects.filter(id=document_id).update(heartbeat_at=timezone.now(), updated_at=timezone.now(), **fields)
    return still_wanted(document_id)


class HeartbeatAndCancelCheck:
    """A run's check, asked every half second: a heartbeat write every HEARTBEAT_S, the cancel read each time."""

    def __init__(self, document_id):
        self.document_id = document_id
        self.last_beat = 0.0

    def __call__(self, **fields) -> bool:
        now = time.monotonic()
        if now - self.last_beat >= HEARTBEAT_S:
            self.last_beat = now
            return heartbeat(self.document_id, **fields)
        return still_wanted(self.document_id)


def stalled_documents(older_than_s: float) -> list[str]:
    """Documents whose worker stopped reporting (killed): they are to be run again."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    running = [Document.Status.EXTRACTING, Document.Status.SUMMARIZING]
    stalled = Document.objects.filter(status__in=running, heartbeat_at__lt=cutoff)
    return [str(pk) for pk in stalled.values_list("id", flat=True)]


def claim_stalled(document_id) -> str:
    """Clear a stalled document's heartbeat (so it is queued once, and its next run may claim it);
    say which step to run again, or "" when it has had its runs and is failed instead."""
    document = Document.objects.filter(id=document_id).first()
    if document is None:
        return ""
    if document.attempts >= settings.DOCUMENT_MAX_ATTEMPTS:
        message = ngettext(
            "Reading this document stopped %(count)d time before it finished, so it was given up.",
            "Reading this document stopped %(count)d times before it finished, so it was given up.",
            document.attempts,
        ) % {"count": document.attempts}
        if document.status == Document.Status.EXTRACTING:
            fail_reading(document.id, message)
            stored_file(document).unlink(missing_ok=True)
        else:  # the summary's finished parts are kept: trying again continues from them
            stop_summary(document.id, Document.Status.FAILED, message)
        return ""
    Document.objects.filter(id=document_id).update(heartbeat_at=None)
    return document.status
