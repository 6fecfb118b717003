"""A person uploads a PDF from the chat page and sees its summary arrive with page citations."""

import time

import pytest
from playwright.sync_api import expect

from chat.models import Document
from monitor.profiles.selectors import find_profile
from tests.browser.test_chat_page import log_in
from tests.support import pdfs
from tests.support.client import make_user
from tests.support.hold import queue_slots_held

pytestmark = pytest.mark.usefixtures("web_server", "celery_worker")


def test_upload_pdf_and_see_the_summary_with_pages(browser, llama, tmp_path):
    path = tmp_path / "harbour report.pdf"
    path.write_bytes(pdfs.report_pdf(3, words_per_page=20))
    user = make_user()
    page = browser.new_page()
    log_in(page, user)

    page.set_input_files("#document-input", str(path))
    expect(page.locator("#document-form-name")).to_have_text("harbour report.pdf")
    page.select_option("#document-form select[name=language]", "en")
    page.click("#document-upload")

    # A new conversation is made for the document, and its summary appears there.
    page.wait_for_url("**/c/*/")
    card = page.locator("article.document")
    expect(card.locator(".doc-name")).to_have_text("harbour report.pdf")
    expect(card).to_have_attribute("data-status", "ready", timeout=240_000)
    expect(card.locator(".summary")).to_contain_text("pp. 1–3")
    expect(card.locator(".doc-summarize")).to_be_visible()
    # Delete asks first, then the card and the document are gone.
    page.once("dialog", lambda dialog: dialog.accept())
    card.locator(".doc-delete").click()
    expect(card).to_have_count(0)
    assert not Document.objects.filter(owner=user).exists()
    page.close()


def test_refused_and_locked_files_say_why(browser, llama, tmp_path):
    user = make_user()
    page = browser.new_page()
    log_in(page, user)

    broken = tmp_path / "broken.pdf"
    broken.write_bytes(pdfs.corrupt_pdf())
    page.set_input_files("#document-input", str(broken))
    page.click("#document-upload")
    expect(page.locator("#document-error")).to_have_text("This PDF is damaged and cannot be read.")

    locked = tmp_path / "locked.pdf"
    locked.write_bytes(pdfs.text_pdf([["Locked text."]], encrypt_password="open-sesame"))
    page.set_input_files("#document-input", str(locked))
    page.click("#document-upload")
    expect(page.locator("#document-error")).to_have_text(
        "This PDF is protected by a password. Enter it to read the file."
    )
    expect(page.locator("#password-field")).to_be_visible()
    page.fill("#password-field input", "open-sesame")
    # The profile's slots are taken until the test lets go: the summary waits its turn,
    # so Cancel always finds it unfinished, on a fast machine or a slow one.
    with queue_slots_held(find_profile(None).name, 2):
        page.click("#document-upload")
        page.wait_for_url("**/c/*/")
        card = page.locator("article.document")
        expect(card.locator(".doc-name")).to_have_text("locked.pdf")
        expect(card).to_have_attribute("data-status", "summarizing", timeout=60_000)
        card.locator(".doc-cancel").click()
        expect(card).to_have_attribute("data-status", "cancelled", timeout=30_000)
    # Nothing keeps working for the next tests.
    deadline = time.monotonic() + 30
    while any(slot["is_processing"] for slot in llama.slots()):
        assert time.monotonic() < deadline, "slots still busy after cancel"
        time.sleep(0.1)
    page.close()
