"""Documents end to end: HTTP upload, the real Celery worker, the real llama-server summarizing.

The summary's quality is not checked (a 270M model); the pipeline, the page
references, cancel and resumption after a killed worker are.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from chat.conversations.context import documents_budget
from chat.documents import uploads
from chat.documents.retrieval import document_system_message
from chat.models import Document, DocumentChunk, DocumentPage
from monitor.llama.serving import serving_info
from monitor.nodes.registry import placement_here
from monitor.profiles.clients import profile_client
from monitor.profiles.selectors import find_profile
from tests.support import pdfs, queue_state
from tests.support.client import base_url, chat_socket, events_until, login, make_user, send, upload_document
from tests.support.hold import queue_slots_held, read_queue

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")


def post(http, url: str, **fields):
    token = http.cookies["csrftoken"]
    return http.post(url, data=fields, headers={"X-CSRFToken": token, "Referer": base_url() + "/"})


def wait_for(document_id, statuses, timeout=300, check=None, poll_s=0.3) -> Document:
    deadline = time.monotonic() + timeout
    while True:
        document = Document.objects.get(id=document_id)
        if document.status in statuses:
            return document
        if check:
            check(document)
        assert time.monotonic() < deadline, f"still {document.status}: {document.error}"
        time.sleep(poll_s)


def long_report(pages: int) -> bytes:
    # About 90 tokens a page: the tests' 400-token chunks take about four pages each.
    return pdfs.report_pdf(pages, words_per_page=60)


def test_summary_covers_every_page_and_resumes_after_a_killed_worker(llama, celery_worker):
    """The whole pipeline through HTTP and the worker, killed half-way: done chunks are never paid twice.

    Half-way is held, not raced: the test keeps the pool's slots but one, which it lets one chunk's
    model call take at a time and takes back as that call ends (a person goes before background work),
    so the worker is killed once a chunk is done and while no other can start, however fast the model."""
    from chat.tasks import resume_stalled_documents
    from qwenweb.celery import app
    from tests.support.stack import wait_until

    user = make_user()
    http = login(user)
    profile = find_profile(None)
    slots = profile.parallel  # a summary runs as many chunks at once (chat/documents/summary_plan.py)

    def done_chunks():
        return {
            c.id: (c.summary, c.finished_at, c.requests)
            for c in DocumentChunk.objects.filter(document_id=document_id, done=True)
        }

    def background(read) -> int:
        return read_queue(profile.name, lambda queue: read(queue, "background"))

    def chunk_calls_in_line() -> None:
        """Until every chunk the summary runs at once waits for a slot (so one that ran is done, or
        asked again): nothing changes from then on while the test holds the slots."""
        wait_until(lambda: background(queue_state.waiting_count) == slots, 300, "the summary's chunks in line")

    # Documents other tests left half-run in this shared database (unit tests run pieces of the
    # pipeline by hand) must not stand in this summary's line, nor take the one worker from it.
    Document.objects.filter(status__in=Document.ACTIVE).update(status="cancelled")
    with contextlib.ExitStack() as holds:
        if slots > 1:
            holds.enter_context(queue_slots_held(profile.name, slots - 1))  # the test's until the kill
        gate = holds.enter_context(contextlib.ExitStack())
        gate.enter_context(queue_slots_held(profile.name, 1))
        response = upload_document(http, "report.pdf", long_report(16), language="en")
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["document"]["status"] == "queued" and body["document"]["page_count"] == 16
        document_id = body["document"]["id"]
        chunk_calls_in_line()
        while not done_chunks():
            gate.close()  # one chunk's call takes the slot (no person waits)
            wait_until(lambda: background(queue_state.active_count) == 1, 60, "a chunk's call running")
            gate.enter_context(queue_slots_held(profile.name, 1, wait_s=600))  # back as that call ends
            chunk_calls_in_line()
            assert Document.objects.get(id=document_id).status in Document.ACTIVE
        celery_worker.kill()
        before = done_chunks()
        level0 = list(DocumentChunk.objects.filter(document_id=document_id, level=0))
        assert 0 < len(before) < len(level0)
        status = http.get(body["document"]["urls"]["status"]).json()["document"]
        assert status["status"] == "summarizing" and status["chunks_done"] == len(before)
        assert {c["state"] for c in status["chunks"]} >= {"done"}
        # Started again while the slots are held: at its start it frees the places in line of the
        # worker it replaces, so none of them is handed a slot when the test lets go.
        celery_worker.start()
        wait_until(lambda: bool(app.control.ping(timeout=0.5)), 60, "celery worker")
    Document.objects.exclude(id=document_id).filter(status__in=Document.ACTIVE).update(status="cancelled")
    # Its heartbeat stopped with the killed worker: stalled for any length of time past it.
    assert resume_stalled_documents.delay(0).get(timeout=30) == [document_id]
    document = wait_for(document_id, {"ready", "failed"}, timeout=600)
    assert document.status == "ready", document.error

    after = done_chunks()
    for chunk_id, kept in before.items():
        assert after[chunk_id] == kept, "a chunk done before the kill was summarized again"
        # One model call, or two where the first came back a copy and was asked again in other words
        # (chat/documents/summary_review.py): which one depends on what the model wrote.
        assert kept[2] in (1, 2)
    assert list(DocumentPage.objects.filter(document=document).values_list("number", flat=True)) == list(range(1, 17))
    level0 = list(DocumentChunk.objects.filter(document=document, level=0))
    assert len(level0) >= 3, "the test document should need several chunks"
    # The chunks cover every page once, in order, and each fits one slot's context.
    covered = [n for c in level0 for n in range(c.first_page, c.last_page + 1)]
    assert covered == list(range(1, 17))
    info = asyncio.run(serving_info(profile_client(find_profile(), placement_here(find_profile())), fresh=True))
    assert all(c.tokens < info.n_ctx for c in level0)
    assert all(c.done and c.summary for c in DocumentChunk.objects.filter(document=document))
    assert DocumentChunk.objects.filter(document=document, level__gte=1).exists()
    # Every part is cited by its pages in the final summary.
    assert document.summary.index("### By section") > 0
    for chunk in level0:
        assert f"**{chunk.pages_label}**" in document.summary
    status = http.get(body["document"]["urls"]["status"]).json()["document"]
    assert status["status"] == "ready" and status["chunks_done"] == status["chunks_total"]


def test_cancel_stops_the_summary_and_frees_the_slots(llama):
    user = make_user()
    http = login(user)
    body = upload_document(http, "cancel.pdf", long_report(24), language="en").json()
    document_id = body["document"]["id"]
    deadline = time.monotonic() + 120
    while not DocumentChunk.objects.filter(document_id=document_id, requests__gt=0).exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    response = post(http, body["document"]["urls"]["cancel"])
    assert response.status_code == 200
    document = wait_for(document_id, {"cancelled", "ready", "failed"}, timeout=30)
    assert document.status == "cancelled"
    # llama-server sees the closed connection once the prompt batch in progress ends (seconds on a busy box).
    deadline = time.monotonic() + 20
    while any(slot["is_processing"] for slot in llama.slots()):
        assert time.monotonic() < deadline, "slots still busy after cancel"
        time.sleep(0.1)
    assert DocumentChunk.objects.filter(document_id=document_id, done=False).exists()
    assert http.get(body["document"]["urls"]["status"]).json()["document"]["status_label"] == "Cancelled"


@pytest.mark.parametrize(
    ("name", "data", "fields", "message"),
    [
        ("broken.pdf", pdfs.corrupt_pdf(), {}, "This PDF is damaged and cannot be read."),
        ("fake.pdf", b"just some text", {}, "This file is not a PDF, whatever its name says."),
        ("notes.txt", bytes(range(256)), {}, "This file is not text, whatever its name says."),
        ("locked.pdf", pdfs.text_pdf([["x"]], encrypt_password="pw"), {}, "This PDF is protected by a password."),
        ("locked.pdf", pdfs.text_pdf([["x"]], encrypt_password="pw"), {"password": "no"}, "The password is not right"),
    ],
)
def test_refused_uploads_say_why_and_store_nothing(name, data, fields, message):
    user = make_user()
    http = login(user)
    before = set(uploads.document_dir().iterdir())
    response = upload_document(http, name, data, **fields)
    assert response.status_code == 400
    assert response.json()["error"].startswith(message)
    assert response.json().get("needs_password", False) == ("password" in message)
    assert not Document.objects.filter(owner=user).exists()
    assert set(uploads.document_dir().iterdir()) == before


def test_encrypted_pdf_with_its_password_is_read_and_the_password_kept_nowhere(llama):
    user = make_user()
    http = login(user)
    data = pdfs.text_pdf([["The harbour budget is 42 coins."]], encrypt_password="hunter22")
    response = upload_document(http, "locked.pdf", data, password="hunter22", language="en")
    assert response.status_code == 201, response.text
    document = wait_for(response.json()["document"]["id"], {"ready", "failed"})
    assert document.status == "ready", document.error
    assert document.pages.get().text == "The harbour budget is 42 coins."
    row = Document.objects.filter(id=document.id).values().get()
    assert not any("hunter22" in str(value) for value in row.values())


def test_scanned_only_pdf_is_reported_with_its_pages():
    user = make_user()
    http = login(user)
    body = upload_document(http, "scan.pdf", pdfs.scanned_page_pdf(0, (1, 2, 3))).json()
    document = wait_for(body["document"]["id"], {"failed", "ready"}, timeout=60)
    status = http.get(body["document"]["urls"]["status"]).json()["document"]
    assert status["status"] == "failed"
    assert "text recognition (OCR) found no text on pages 1–3" in status["error"]
    assert not DocumentPage.objects.filter(document=document).exists()


def test_questions_use_the_summary_and_matching_pages(llama):
    user = make_user()
    http = login(user)
    body = upload_document(http, "facts.pdf", pdfs.report_pdf(20, words_per_page=8), language="en").json()
    document = wait_for(body["document"]["id"], {"ready", "failed"})
    assert document.status == "ready", document.error
    client = profile_client(find_profile(), placement_here(find_profile()))
    info = asyncio.run(serving_info(client, fresh=True))
    system = asyncio.run(
        document_system_message(client, document.conversation_id, "What is topic017?", documents_budget(info.n_ctx))
    )
    assert "[facts.pdf, p. 17]\nPage 17 is about topic017." in system
    assert "Summary:" in system and "(p. N)" in system
    assert asyncio.run(client.count_tokens(system)) <= info.n_ctx // 2

    with chat_socket(http) as ws:
        send(ws, type="send", conversation=str(document.conversation_id), text="What is topic017 about?")
        events = events_until(ws)
    done = events[-1]
    assert done["type"] == "done" and done["status"] == "complete", done
    assert done["stats"]["prompt_tokens"] > 200  # the document context went with the question


def test_summary_language_follows_the_choice_and_restarts(llama):
    user = make_user()
    http = login(user)
    body = upload_document(http, "short.txt", b"The lighthouse needs a new lamp.\n" * 3).json()
    document = wait_for(body["document"]["id"], {"ready", "failed"})
    assert document.status == "ready", document.error
    first_chunks = set(DocumentChunk.objects.filter(document=document).values_list("id", flat=True))
    response = post(http, body["document"]["urls"]["summarize"], language="zh-hans")
    assert response.status_code == 200, response.text
    document = wait_for(document.id, {"ready", "failed"})
    assert document.summary_language == "zh-hans" and document.status == "ready"
    assert first_chunks.isdisjoint(DocumentChunk.objects.filter(document=document).values_list("id", flat=True))
    refused = post(http, body["document"]["urls"]["summarize"], language="xx")
    assert refused.status_code == 400 and refused.json()["error"] == "Unknown summary language."
