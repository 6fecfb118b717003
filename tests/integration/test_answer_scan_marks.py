"""An answer about a document with a scanned page says which of its citations point at text
read by OCR: the page is a real image-only page of a PDF made here, read by the real
Tesseract in the real ingest; the passages go to the model labelled so.

The model is a FAKE UPSTREAM (tests/support/fake_summary_upstream.py): the small real model
cannot be made to cite a given page, so the fake cites one scanned and one typed page, and
records what it was given. The real Redis queue and database are used.
"""

from __future__ import annotations

import pytest

from chat.conversations.services import create_conversation, post_user_message
from chat.documents import ingest, uploads
from chat.models import Document
from tests.support import pdfs
from tests.support.client import make_user
from tests.support.fake_summary_upstream import FakeSummaryUpstream
from tests.support.turns import run_turn

pytestmark = pytest.mark.usefixtures("redis_server")

TYPED = ["The lighthouse keeper wrote a report about the harbour."]
SCANNED = ["Storms reached the harbour in March."]


def test_an_answers_citation_of_a_page_read_by_ocr_says_so():
    user = make_user()
    conversation = create_conversation(user)
    data = pdfs.image_text_pdf([TYPED, SCANNED], text_layer_pages=(1,))
    document = uploads.create_document(user, conversation, "scan.pdf", data)
    assert ingest.ingest(document.id) is True
    document.refresh_from_db()
    assert document.scanned_pages == [2] and document.ocr_pages == [2]
    Document.objects.filter(id=document.id).update(status=Document.Status.READY)
    _question, assistant = post_user_message(conversation, "When did storms reach the harbour?", None)

    answer = "Storms came in March (p. 2). The keeper wrote it (p. 1)."
    fake = FakeSummaryUpstream(lambda system, user: answer, n_ctx=4096)
    try:
        events = run_turn(fake.url, conversation, assistant.id, user)
    finally:
        fake.close()
    assert events[-1]["status"] == "complete", events[-1]
    system = fake.requests[-1][0]
    assert "[scan.pdf, p. 2, read by OCR]\n" in system and "[scan.pdf, p. 1]\n" in system, system
    shown = "".join(event["text"] for event in events if event["type"] == "token")
    assert shown == "Storms came in March (p. 2, read by OCR). The keeper wrote it (p. 1).", shown
    assistant.refresh_from_db()
    assert assistant.content == shown
