"""Scans, Word and HTML through HTTP, the real workers and the real llama-server, and the
documents' own worker: a long reading never holds up the default worker's tasks.

What the model writes is never checked; the stored text, the section and OCR labels the
app writes around it, and the refusals are.
"""

from __future__ import annotations

import pytest

from chat.models import Document, DocumentPage
from tests.integration.test_document_limits import NOTES, assert_cancelled_mid_read, extractor_of
from tests.integration.test_documents import wait_for
from tests.support import office, pdfs
from tests.support.client import login, make_user, upload_document
from tests.support.hold import reading_held

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")


def test_scanned_pages_are_read_by_ocr_in_english_and_chinese(llama):
    http = login(make_user())
    data = pdfs.image_text_pdf(
        [
            ["The lighthouse keeper wrote a report.", "Storms reached the harbour in March."],
            ["这是一份关于灯塔的报告。", "今年的预算增加了。"],
        ]
    )
    body = upload_document(http, "scan.pdf", data, language="en").json()["document"]
    document = wait_for(body["id"], {"ready", "failed"}, timeout=300)
    assert document.status == "ready", document.error
    assert document.scanned_pages == [1, 2] and document.ocr_pages == [1, 2]
    english, chinese = (page.text for page in DocumentPage.objects.filter(document=document))
    assert "lighthouse keeper" in english and "harbour in March" in english
    chinese = "".join(chinese.split())
    assert "灯塔的报告" in chinese and "预算增加" in chinese
    status = http.get(body["urls"]["status"]).json()["document"]
    assert status["ocr_pages"] == [1, 2]
    assert "read by text recognition (OCR)" in status["scanned_note"]
    assert "(OCR)" in document.summary  # the pages label the app writes under the summary


def test_docx_with_headings_is_summarized_with_section_references(llama):
    http = login(make_user())
    body = upload_document(http, "keeper.docx", office.docx_with_headings(), language="en").json()["document"]
    assert body["kind"] == "docx" and body["page_count"] == 3
    document = wait_for(body["id"], {"ready", "failed"}, timeout=300)
    assert document.status == "ready", document.error
    sections = [page.text for page in DocumentPage.objects.filter(document=document)]
    assert [text.split("\n")[0] for text in sections] == ["§ 1 Harbour lights", "§ 2 Storm damage", "§ 3 Budget"]
    assert "§" in document.summary and "p." not in document.summary.rsplit("\n", 1)[-1]


def test_html_upload_keeps_its_text_and_drops_its_scripts(llama):
    http = login(make_user())
    body = upload_document(http, "keeper.html", office.html_page(), language="en").json()["document"]
    document = wait_for(body["id"], {"ready", "failed"}, timeout=300)
    assert document.status == "ready", document.error
    text = "\n".join(page.text for page in DocumentPage.objects.filter(document=document))
    assert "§ 2 Harbour lights\nThe lighthouse keeper lit the lamp every night of the year." in text
    assert "stolen-secret-script" not in text


def test_docx_zip_bomb_is_refused_with_the_limit_named():
    user = make_user()
    response = upload_document(login(user), "bomb.docx", office.docx_zip_bomb())
    assert response.status_code == 400
    assert response.json()["error"] == (
        "This Word document unpacks to more than 100 MB; the limit is there to stop zip bombs."
    )
    assert not Document.objects.filter(owner=user).exists()


def test_a_held_reading_does_not_hold_up_the_default_worker(celery_worker):
    """The documents' worker is stuck in a reading (its extractor suspended by the test); a task
    of the default queue still runs at once."""
    from chat.tasks import sweep_orphaned_streams

    http = login(make_user())
    body = reading_held(celery_worker, lambda: upload_document(http, "notes.txt", NOTES).json())
    child = extractor_of(body["id"])
    child.suspend()
    try:
        wait_for(body["id"], {"extracting"}, timeout=30)
        sweep_orphaned_streams.delay(3600).get(timeout=60)  # it ends, though a reader is held
        assert Document.objects.get(id=body["id"]).status == "extracting"  # still held
    finally:
        assert_cancelled_mid_read(http, body)
