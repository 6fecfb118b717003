"""Scanned pages read by the model itself, as an admin chose for a profile with a vision projector.

The model is the product's family for real (tests/support/qwen35.py): a ``qwen35moe`` with a
vision projector ``mtmd`` loads, served by a profile of the product's own llama-server. Each page
goes up through the app (upload), the extraction sandbox renders it, the Celery worker sends it to
llama-server as an image, which encodes it and answers with the profile's forced text (a thought,
then ``ANSWER``); the page's text is that answer, the thought left out.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

import httpx
import pytest

from chat.models import Conversation, Document
from monitor.models import ServerProfile
from monitor.nodes.registry import placement_here
from monitor.profiles.presets import live_id
from tests.support import pdfs, queue_state
from tests.support.client import login, make_user, upload_document
from tests.support.hold import assert_queue_left_idle, queue_slots_held, read_queue
from tests.support.qwen35 import ANSWER, GRAMMAR, PROJECTOR_FILE, serving_profile

MODELS = Path(os.environ["QWENWEB_MODELS_DIR"])
PAGES = [["The lighthouse keeper wrote a report."], ["Storms reached the harbour in March."]]
pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")


@pytest.fixture(scope="module")
def reader(llama_server, web_server):
    fields = dict(
        mmproj_file=PROJECTOR_FILE, scan_reader=ServerProfile.ScanReader.MODEL,
        extra_args=f"--grammar {shlex.quote(GRAMMAR)}",
    )  # fmt: skip
    with serving_profile(MODELS, "qwen35-scans", **fields) as profile:
        yield profile


def _upload(profile: ServerProfile) -> tuple[httpx.Client, Document]:
    user = make_user()
    http = login(user)
    conversation = Conversation.objects.create(owner=user, profile=profile)
    response = upload_document(http, "scan.pdf", pdfs.image_text_pdf(PAGES), conversation=str(conversation.id))
    assert response.status_code == 201, response.text
    return http, Document.objects.get(id=response.json()["document"]["id"])


def _wait(document: Document, done, timeout: float = 240) -> Document:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        document.refresh_from_db()
        if done(document):
            return document
        time.sleep(0.3)
    raise AssertionError(f"document still {document.status}: {document.error} {document.model_read_pages}")


def _cancel(http: httpx.Client, document: Document) -> None:
    token = http.cookies["csrftoken"]
    response = http.post(f"/documents/{document.id}/cancel/", headers={"X-CSRFToken": token})
    assert response.status_code == 200, response.text


def test_the_model_reads_each_scanned_page_as_background_work(reader, llama_server):
    http, document = _upload(reader)
    document = _wait(document, lambda d: d.model_read_pages == [1, 2] or d.status in ("failed", "cancelled"))
    assert document.model_read_pages == [1, 2] and document.ocr_pages == [] and document.scan_note == ""
    assert [page.text for page in document.pages.order_by("number")] == [ANSWER, ANSWER]
    # llama-server encoded the page as an image: the rendered prompt holds it, and the page (at most
    # DOCUMENT_VISION_MAX_EDGE = 1280 pixels, a token per 32 x 32) took at most 40 x 52 tokens of it.
    slots = httpx.get(
        llama_server.url + "/slots",
        params={"model": live_id(reader, placement_here(reader))},
        headers=llama_server.headers,
        timeout=10,
    ).json()
    pages = [slot for slot in slots if "Transcribe this page." in (slot.get("prompt") or "")]
    assert pages and "<|vision_start|>" in pages[0]["prompt"]
    assert 100 < pages[0]["n_prompt_tokens"] <= 40 * 52 + 120, pages[0]["n_prompt_tokens"]
    # Each page took a slot of the profile's fair queue as background work: people go first.
    grants = read_queue(reader.name, queue_state.grants)
    assert [grant.priority for grant in grants][-2:] == ["background", "background"]
    _cancel(http, document)  # the summary that follows is not this test's business
    _wait(document, lambda d: d.status not in Document.ACTIVE)


def test_a_cancel_while_a_page_waits_for_the_model_stops_and_keeps_nothing(reader):
    """The profile's slots are held (people using them): the page waits in line; the person
    cancels; the run ends without waiting for a slot, and no page was stored."""
    with queue_slots_held(reader.name, reader.parallel):
        http, document = _upload(reader)
        waiting = _wait_for_waiter(reader.name)
        assert waiting == 1
        _cancel(http, document)
        document = _wait(document, lambda d: d.status not in Document.ACTIVE, timeout=60)
    assert document.status == Document.Status.CANCELLED and not document.pages.exists()
    assert_queue_left_idle(reader.name)


def _wait_for_waiter(queue_name: str, timeout: float = 120) -> int:
    """The number of requests waiting in the queue, once the document's first page is one of them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        count = read_queue(queue_name, lambda queue: queue_state.waiting_count(queue, "background"))
        if count:
            return count
        time.sleep(0.2)
    raise AssertionError("the page never waited for the model")
