"""Documents against poison files and people's changes of mind, through HTTP and the real worker.

Faults are injected for real: the worker's extractor child, held at its file's opening
(``hold.reading_held``), is found by its argv and killed (a crash) or stopped (a hang, and a hold
point the test releases by cancelling or deleting).
"""

from __future__ import annotations

import time

import psutil
import pytest

from chat.documents import uploads
from chat.models import Conversation, Document, DocumentChunk, DocumentPage, Message
from monitor.profiles.selectors import find_profile
from tests.integration.test_documents import post, wait_for
from tests.support.client import login, make_user, upload_document
from tests.support.hold import queue_slots_held, reading_held

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")
# What the held readings upload: a text file, whose reader waits at a named pipe (``reading_held``).
NOTES = b"The lighthouse keeper counts ships.\n" * 20


def extractor_of(document_id: str, timeout: float = 60) -> psutil.Process:
    """The worker's extractor child for this document, held at its file's opening (``reading_held``):
    it waits there until the test ends it, so finding it races nothing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for process in psutil.process_iter(["cmdline"]):
            cmdline = process.info["cmdline"] or []
            if "chat.documents.extract_worker" in cmdline and any(document_id in part for part in cmdline):
                return process
        time.sleep(0.01)
    raise AssertionError("no extractor child for the document")


def gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_reader_that_crashes_fails_its_document_only(llama, celery_worker):
    user = make_user()
    http = login(user)
    poison = reading_held(celery_worker, lambda: upload_document(http, "poison.txt", NOTES, language="en").json())
    extractor_of(poison["id"]).kill()  # what a file that crashes its reader (PDFium, lxml) does
    healthy = upload_document(http, "notes.txt", NOTES, language="en").json()
    failed = wait_for(poison["id"], {"failed", "ready", "summarizing"}, timeout=60)
    assert failed.status == "failed"
    status = http.get(poison["urls"]["status"]).json()["document"]
    assert status["error"] == "The file could not be read: it crashed the reader."
    assert not DocumentPage.objects.filter(document_id=poison["id"]).exists()
    # The same worker goes on and reads the next document to the end.
    document = wait_for(healthy["document"]["id"], {"ready", "failed"})
    assert document.status == "ready", document.error
    assert document.pages.count() == 1


def assert_cancelled_mid_read(http, body: dict) -> Document:
    """Cancel a document the test holds at work (it would never end by itself), and see it cancelled:
    its work cut short, not run to its end (``ready``) or left running (the wait's limit)."""
    assert post(http, body["urls"]["cancel"]).status_code == 200
    document = wait_for(body["id"], {"cancelled", "failed", "ready"}, timeout=30, poll_s=0.05)
    assert document.status == "cancelled"
    return document


def test_cancel_ends_a_reading_held_mid_way(celery_worker):
    user = make_user()
    http = login(user)
    body = reading_held(celery_worker, lambda: upload_document(http, "notes.txt", NOTES).json())
    child = extractor_of(body["id"])
    child.suspend()  # the reader hangs here until the test cancels
    wait_for(body["id"], {"extracting"}, timeout=30)
    document = assert_cancelled_mid_read(http, body)
    assert gone(child)
    assert not uploads.stored_file(document).exists()


def test_cancel_ends_a_summary_waiting_in_line(llama):
    user = make_user()
    http = login(user)
    # The summary waits in the profile's fair queue, held by the test, until it is cancelled.
    with queue_slots_held(find_profile(None).name, 2):
        body = upload_document(http, "notes.txt", b"The harbour has three piers.\n" * 10, language="en").json()[
            "document"
        ]
        wait_for(body["id"], {"summarizing"}, timeout=60)
        deadline = time.monotonic() + 60
        while not DocumentChunk.objects.filter(document_id=body["id"]).exists():
            assert time.monotonic() < deadline, "the summary was never planned"
            time.sleep(0.05)
        assert_cancelled_mid_read(http, body)


def test_deleting_a_conversation_deletes_its_documents_rows_and_files(llama, celery_worker):
    user = make_user()
    http = login(user)
    read = upload_document(http, "notes.txt", b"The harbour has three piers.\n" * 10, language="en").json()
    conversation = Conversation.objects.get(id=read["conversation"])
    assert wait_for(read["document"]["id"], {"ready", "failed"}).status == "ready"
    assert DocumentChunk.objects.filter(document_id=read["document"]["id"]).exists()
    # A second one still being read: its stored file is on disk, its reader held.
    reading = reading_held(
        celery_worker,
        lambda: upload_document(http, "notes.txt", NOTES, conversation=str(conversation.id)).json(),
    )
    child = extractor_of(reading["id"])
    child.suspend()
    stored = uploads.stored_file(Document.objects.get(id=reading["id"]))
    assert stored.exists()
    other = make_user()
    assert post(login(other), f"/c/{conversation.id}/delete/").status_code == 404
    response = post(http, f"/c/{conversation.id}/delete/")
    assert response.status_code == 200  # redirected to the chat page
    ids = [read["document"]["id"], reading["id"]]
    assert not Conversation.objects.filter(id=conversation.id).exists()
    assert not Message.objects.filter(conversation_id=conversation.id).exists()
    assert not Document.objects.filter(id__in=ids).exists()
    assert not DocumentPage.objects.filter(document_id__in=ids).exists()
    assert not DocumentChunk.objects.filter(document_id__in=ids).exists()
    assert not stored.exists() and not any(str(i) in p.name for i in ids for p in uploads.document_dir().iterdir())
    # The worker sees the document gone at its next look and ends the reader.
    deadline = time.monotonic() + 5
    while not gone(child):
        assert time.monotonic() < deadline, "the reader of a deleted document is still running"
        time.sleep(0.05)


def test_a_person_deletes_their_document_and_nobody_else_can():
    user, other = make_user(), make_user()
    http, other_http = login(user), login(other)
    body = upload_document(http, "notes.txt", b"Only a few words.\n").json()
    document = body["document"]
    wait_for(document["id"], {"ready", "failed", "summarizing"}, timeout=60)
    refused = post(other_http, document["urls"]["delete"])
    assert refused.status_code == 404 and refused.json()["error"] == "This document does not exist."
    assert Document.objects.filter(id=document["id"]).exists()
    response = post(http, document["urls"]["delete"])
    assert response.status_code == 200 and response.json() == {"deleted": document["id"]}
    assert not Document.objects.filter(id=document["id"]).exists()
    assert not DocumentPage.objects.filter(document_id=document["id"]).exists()
    assert http.get(document["urls"]["status"]).status_code == 404
    assert Conversation.objects.filter(id=body["conversation"]).exists()  # the conversation stays


def test_a_50_mb_single_line_file_is_refused_quickly():
    user = make_user()
    http = login(user)
    started = time.monotonic()
    response = upload_document(http, "one-line.txt", b"x" * (50 * 1024 * 1024 - 1))
    took = time.monotonic() - started
    assert response.status_code == 400
    assert response.json()["error"] == "The document has 17477 pages; the limit is 2000."
    print(f"50 MB one-line upload refused in {took:.1f} s")
    assert took < 60  # cutting it in pages was quadratic: hours
    assert not Document.objects.filter(owner=user).exists()
