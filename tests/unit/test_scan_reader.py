"""An admin may have the model itself read scanned pages, only for a profile with a vision
projector; where the model cannot (none, or its server down) Tesseract reads them and the
document's card says why. The model-reader path itself is in
tests/integration/test_scan_reader_model.py (it needs Redis for the fair queue)."""

import uuid

import pytest
from django.core.exceptions import ValidationError
from django.test import Client, override_settings

from chat.documents import ingest, selectors, uploads
from chat.models import Conversation, DocumentChunk
from monitor.models import ServerProfile
from monitor.profiles.validation import validate_profile
from monitor.web.forms import ServerProfileForm
from tests.support import client, pdfs

ENGLISH = ["The lighthouse keeper wrote a report.", "Storms reached the harbour in March."]


@pytest.fixture(autouse=True)
def own_profiles():
    """The profiles a test makes here go with it: a remote one left behind would be read by a later
    test's sampler (and shown down)."""
    yield
    ServerProfile.objects.filter(name__startswith="scan-").delete()


def make_profile(**fields) -> ServerProfile:
    fields = {"name": f"scan-{uuid.uuid4().hex[:8]}", "model_file": "model.gguf", **fields}
    return ServerProfile.objects.create(**fields)


def scan_document(profile: ServerProfile):
    user = client.make_user()
    conversation = Conversation.objects.create(owner=user, profile=profile)
    document = uploads.create_document(user, conversation, "scan.pdf", pdfs.image_text_pdf([ENGLISH]))
    assert ingest.ingest(document.id) is True
    document.refresh_from_db()
    return document


def test_the_model_as_reader_is_refused_for_a_profile_without_a_vision_projector():
    candidate = ServerProfile(name="no-eyes", model_file="model.gguf", scan_reader=ServerProfile.ScanReader.MODEL)
    try:
        validate_profile(candidate, binary="/bin/true")
    except ValidationError as error:
        errors = error.message_dict
    assert errors["scan_reader"] == [
        "Only a profile with a vision projector can read scanned pages itself: choose one, or Tesseract."
    ]
    candidate.mmproj_file = "mmproj-model.gguf"
    try:
        validate_profile(candidate, binary="/bin/true")
    except ValidationError as error:
        assert "scan_reader" not in error.message_dict


def test_the_staff_form_offers_only_the_two_readers():
    form = ServerProfileForm({"scan_reader": "shell"}, model_names=[])
    assert not form.is_valid() and "scan_reader" in form.errors
    choices = [value for value, _label in form.fields["scan_reader"].choices]
    assert choices == ["tesseract", "model"]


@override_settings(ALLOWED_HOSTS=["testserver"])
def test_only_staff_may_choose_the_reader():
    profile = make_profile()
    browser = Client()
    browser.force_login(client.make_user())
    response = browser.post(f"/monitor/profiles/{profile.pk}/edit/", {"scan_reader": "model", "name": profile.name})
    assert response.status_code in (302, 403)
    profile.refresh_from_db()
    assert profile.scan_reader == ServerProfile.ScanReader.TESSERACT
    staff = Client()
    staff.force_login(client.make_user(is_staff=True))
    page = staff.get(f"/monitor/profiles/{profile.pk}/edit/")
    assert page.status_code == 200 and 'name="scan_reader"' in page.content.decode()


def test_without_a_vision_projector_tesseract_reads_the_scans_and_the_card_says_why():
    document = scan_document(make_profile(scan_reader=ServerProfile.ScanReader.MODEL))
    assert document.ocr_pages == [1] and document.model_read_pages == []
    assert "lighthouse keeper" in document.pages.get(number=1).text
    note = selectors.document_payload(document)["scanned_note"]
    assert note.startswith(
        "The model could not read the scanned pages (its server profile has no vision projector), "
        "so text recognition (OCR) read them. Page 1 is a scanned image; its text was read by text recognition"
    ), note
    chunk = DocumentChunk(document=document, level=0, index=0, first_page=1, last_page=1, text="", tokens=1)
    assert chunk.pages_label == "p. 1 (OCR)"


def test_with_the_models_server_down_tesseract_reads_the_rendered_scans_and_the_card_says_why():
    down = make_profile(
        model_file="",
        remote_url="http://127.0.0.1:9",  # nothing listens on the discard port
        mmproj_file="mmproj-model.gguf",
        scan_reader=ServerProfile.ScanReader.MODEL,
    )
    document = scan_document(down)
    assert document.ocr_pages == [1] and document.model_read_pages == []
    assert "lighthouse keeper" in document.pages.get(number=1).text  # read from the PNG the child rendered
    assert document.scan_note.startswith("The model could not read the scanned pages ("), document.scan_note
    assert "so text recognition (OCR) read them." in selectors.document_payload(document)["scanned_note"]


def test_a_profile_left_on_tesseract_reads_scans_as_before():
    document = scan_document(make_profile())
    assert document.ocr_pages == [1] and document.model_read_pages == [] and document.scan_note == ""
