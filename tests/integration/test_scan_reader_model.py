"""Scanned pages read by the model itself, as an admin chose for a profile with a vision projector.

The model here is a FAKE UPSTREAM (tests/support/fake_summary_upstream.py with ``vision=True``):
the default Gemma 270M model has no vision projector, so no real llama-server here can take an
image. The fake checks what it is sent (a PNG page within the size limit) and answers with a
transcription; the real extraction sandbox, Redis fair queue and database are used.
"""

from __future__ import annotations

import asyncio
import base64
import io
import threading
import uuid

import pytest
from django.test import override_settings
from PIL import Image

from chat.documents import ingest, selectors, uploads
from chat.documents.scan_reading import TRANSCRIBE_SYSTEM
from chat.models import Conversation, Document, DocumentChunk
from monitor.models import ServerProfile
from monitor.serving.queue import FairQueue
from tests.support import pdfs
from tests.support.client import make_user
from tests.support.fake_summary_upstream import FakeSummaryUpstream

pytestmark = pytest.mark.usefixtures("redis_server")

PAGES = [["The lighthouse keeper wrote a report."], ["Storms reached the harbour in March."]]
MAX_EDGE = 640
PAGE_CHARS = 500


def scanned_upload(fake: FakeSummaryUpstream) -> Document:
    """A two-page scan uploaded to a conversation whose profile has the fake read its scans."""
    profile = ServerProfile.objects.create(
        name=f"vision-{uuid.uuid4().hex[:8]}",
        remote_url=fake.url,
        mmproj_file="mmproj-fake.gguf",
        scan_reader=ServerProfile.ScanReader.MODEL,
    )
    user = make_user()
    conversation = Conversation.objects.create(owner=user, profile=profile)
    return uploads.create_document(user, conversation, "scan.pdf", pdfs.image_text_pdf(PAGES))


def _grants(name: str) -> list[str]:
    async def main() -> list[str]:
        queue = FairQueue(name)
        try:
            return [grant.priority for grant in await queue.grants()]
        finally:
            await queue.aclose()

    return asyncio.run(main())


@override_settings(DOCUMENT_VISION_MAX_EDGE=MAX_EDGE, DOCUMENT_VISION_PAGE_CHARS=PAGE_CHARS)
def test_the_model_reads_each_scanned_page_as_background_work():
    seen: list[tuple[str, str, int]] = []

    def transcribe(system: str, user) -> str:
        parts = user if isinstance(user, list) else []
        urls = [part["image_url"]["url"] for part in parts if part.get("type") == "image_url"]
        if len(urls) != 1 or not urls[0].startswith("data:image/png;base64,"):
            seen.append(("no image", system, 0))
            return "no image came"
        with Image.open(io.BytesIO(base64.b64decode(urls[0].split(",", 1)[1]))) as picture:
            seen.append((picture.format, system, max(picture.size)))
        if len(seen) == 1:  # hostile output: control characters, and far too long on the next page
            return "Page one\x00\x07 read by the fake model: the lighthouse keeper."
        return "harbour " * 400

    fake = FakeSummaryUpstream(transcribe, vision=True, slots=2)
    document = scanned_upload(fake)
    profile = document.conversation.profile
    try:
        assert ingest.ingest(document.id) is True
    finally:
        fake.close()
    document.refresh_from_db()
    assert [(kind, system) for kind, system, _edge in seen] == [("PNG", TRANSCRIBE_SYSTEM)] * 2, seen
    assert all(0 < edge <= MAX_EDGE for _kind, _system, edge in seen), seen
    assert document.pages.get(number=1).text == "Page one read by the fake model: the lighthouse keeper."
    assert len(document.pages.get(number=2).text) == PAGE_CHARS
    assert document.model_read_pages == [1, 2] and document.ocr_pages == [] and document.scan_note == ""
    note = selectors.document_payload(document)["scanned_note"]
    assert note == "Pages 1–2 are scanned images; their text was read by the model and may contain errors."
    chunk = DocumentChunk(document=document, level=0, index=0, first_page=1, last_page=2, text="", tokens=1)
    assert chunk.pages_label == "pp. 1–2 (read by the model)"
    # Each page took a slot of the profile's fair queue as background work: people go first.
    assert _grants(profile.name) == ["background", "background"]


def test_a_cancel_stops_the_model_mid_page_and_keeps_nothing():
    """The person cancels while the model is still reading a page: the run stops without waiting
    for the page (the fake answers only once the test has seen the run end)."""
    document_ids: list = []
    release = threading.Event()
    answered: list[str] = []

    def cancel_and_hold(system: str, user) -> str:
        Document.objects.filter(id=document_ids[0]).update(cancel_requested=True)
        release.wait(30)
        answered.append("too late")  # before the answer goes out: a run that waited for it sees this
        return "too late"

    fake = FakeSummaryUpstream(cancel_and_hold, vision=True)
    document = scanned_upload(fake)
    document_ids.append(document.id)
    try:
        assert ingest.ingest(document.id) is False
        assert len(fake.requests) == 1 and answered == []
    finally:
        release.set()
        fake.close()
    document.refresh_from_db()
    assert document.status == Document.Status.CANCELLED and not document.pages.exists()
