"""An uploaded PDF is opened for its checks (page count, a password's decrypted copy) by a limited
child, never by PDFium inside the web process: real children, faults injected for real (the
child is killed or stopped by its pid, found by its argv)."""

from __future__ import annotations

import signal
import threading
import time

import psutil
import pypdfium2
import pytest
from django.test import override_settings

from chat.documents.uploads import check_upload
from chat.errors import DocumentError
from tests.support import pdfs

WORKER = "chat.documents.pdf_check_worker"


def signal_the_check(signal_number) -> threading.Thread:
    """Send ``signal_number`` to the check's child as soon as it runs (it takes a second to start)."""

    def act():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for process in psutil.Process().children():
                try:
                    if WORKER in process.cmdline():
                        process.send_signal(signal_number)
                        return
                except psutil.NoSuchProcess:
                    continue
            time.sleep(0.01)

    thread = threading.Thread(target=act)
    thread.start()
    return thread


@pytest.fixture
def no_pdfium_here(monkeypatch):
    """PDFium unusable in this process (the web process's place): only the child can open a PDF."""

    def refuse(*args, **kwargs):
        raise AssertionError("an uploaded PDF was opened in the web process")

    monkeypatch.setattr(pypdfium2, "PdfDocument", refuse)


def test_the_web_process_never_opens_an_uploaded_pdf(no_pdfium_here):
    data = pdfs.report_pdf(3)
    assert check_upload("report.pdf", data) == ("pdf", 3, data)


def test_a_password_is_used_in_the_child_only(no_pdfium_here):
    # Its refusals and the copy kept: tests/unit/test_document_extraction.py, through the same child.
    data = pdfs.text_pdf([["Secret plans for the harbour."]], encrypt_password="s3cret")
    kind, pages, kept = check_upload("plans.pdf", data, "s3cret")
    assert (kind, pages) == ("pdf", 1) and kept.startswith(b"%PDF-") and kept != data


def test_a_damaged_pdf_is_refused_with_its_reason():
    with pytest.raises(DocumentError) as caught:
        check_upload("fake.pdf", b"%PDF-1.4 this is not a pdf")
    assert str(caught.value) == "This PDF is damaged and cannot be read."


def test_a_check_that_crashes_is_named_and_the_next_upload_is_read():
    killer = signal_the_check(signal.SIGKILL)
    with pytest.raises(DocumentError) as caught:
        check_upload("report.pdf", pdfs.report_pdf(2))
    killer.join()
    assert str(caught.value) == "The file could not be read: it crashed the reader."
    assert check_upload("report.pdf", pdfs.report_pdf(2))[1] == 2


@override_settings(DOCUMENT_EXTRACT_STALL_S=2)
def test_a_hung_check_is_ended():
    stopper = signal_the_check(signal.SIGSTOP)
    started = time.monotonic()
    with pytest.raises(DocumentError) as caught:
        check_upload("report.pdf", pdfs.report_pdf(2))
    stopper.join()
    assert str(caught.value) == "The file could not be read: it took too long."
    assert time.monotonic() - started < 10


def test_the_refusal_is_in_the_persons_language():
    from django.utils import translation

    with translation.override("zh-hans"), pytest.raises(DocumentError) as caught:
        check_upload("fake.pdf", b"%PDF-1.4 this is not a pdf")
    assert str(caught.value) != "This PDF is damaged and cannot be read."
    with translation.override("zh-hans"):
        assert str(caught.value) == translation.gettext("This PDF is damaged and cannot be read.")
