"""An uploaded PDF is opened for its checks (page count, a password's decrypted copy) by a limited
child, never by PDFium inside the web process: real children, real limits, faults injected for
real (a child killed by its pid, found by its argv; one that never answers; one out of memory)."""

from __future__ import annotations

import logging
import subprocess
import threading
import time

import psutil
import pypdfium2
import pytest
from django.test import override_settings

from chat.documents.pdf import upload_check
from chat.documents.uploads import check_upload
from chat.errors import DocumentError
from tests.support import pdfs

STAND_IN = "tests.support.stalled_check_worker"


def kill_the_check() -> threading.Thread:
    """SIGKILL the check's child once it runs (the stand-in waits for it)."""

    def act():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for process in psutil.Process().children():
                try:
                    if STAND_IN in process.cmdline():
                        process.kill()
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


def test_the_password_reaches_the_child_on_its_stdin_only_and_its_environment_is_bare(no_pdfium_here, monkeypatch):
    # Its refusals and the copy kept: tests/unit/test_document_extraction.py, through the same child.
    seen = []
    run = subprocess.run

    def watched(argv, **kwargs):
        seen.append((argv, kwargs["env"]))
        return run(argv, **kwargs)

    monkeypatch.setattr(upload_check.subprocess, "run", watched)
    data = pdfs.text_pdf([["Secret plans for the harbour."]], encrypt_password="s3cret")
    kind, pages, kept = check_upload("plans.pdf", data, "s3cret")
    assert (kind, pages) == ("pdf", 1) and kept.startswith(b"%PDF-") and kept != data
    [(argv, env)] = seen
    assert not any("s3cret" in part for part in argv)
    assert set(env) == {"PATH", "LANG"}


def test_a_damaged_pdf_is_refused_with_its_reason():
    with pytest.raises(DocumentError) as caught:
        check_upload("fake.pdf", b"%PDF-1.4 this is not a pdf")
    assert str(caught.value) == "This PDF is damaged and cannot be read."


def test_a_check_that_crashes_is_named_and_logged_and_the_next_upload_is_read(monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="chat.documents.pdf.upload_check")
    monkeypatch.setattr(upload_check, "CHECK_WORKER", STAND_IN)
    killer = kill_the_check()
    with pytest.raises(DocumentError) as caught:
        check_upload("report.pdf", pdfs.report_pdf(2))
    killer.join()
    assert str(caught.value) == "The file could not be read: it crashed the reader."
    assert "exit code -9" in caplog.text
    monkeypatch.undo()
    assert check_upload("report.pdf", pdfs.report_pdf(2))[1] == 2


@override_settings(DOCUMENT_EXTRACT_STALL_S=2)
def test_a_check_that_never_answers_is_ended(monkeypatch):
    monkeypatch.setattr(upload_check, "CHECK_WORKER", STAND_IN)
    with pytest.raises(DocumentError) as caught:  # a check never ended would hang here
        check_upload("report.pdf", pdfs.report_pdf(2))
    assert str(caught.value) == "The file could not be read: it took too long."


@override_settings(DOCUMENT_EXTRACT_MEMORY_MB=128)
def test_a_pdf_too_large_for_the_childs_memory_fails_alone():
    # 160 MB cannot fit in the child's 128 MB of address space (the upload limit is checked first
    # in check_upload; the check itself is asked here).
    with pytest.raises(DocumentError) as caught:
        upload_check.check_pdf_in_child(b"%PDF-1.4\n" + b"0" * (160 * 1024 * 1024), None)
    assert str(caught.value) == "The file could not be read: it used too much memory."


def test_the_refusal_is_in_the_persons_language():
    from django.utils import translation

    with translation.override("zh-hans"), pytest.raises(DocumentError) as caught:
        check_upload("fake.pdf", b"%PDF-1.4 this is not a pdf")
    assert str(caught.value) != "This PDF is damaged and cannot be read."
    with translation.override("zh-hans"):
        assert str(caught.value) == translation.gettext("This PDF is damaged and cannot be read.")


@pytest.mark.parametrize(
    "answer",
    [
        b'{"pages": Infinity}\n',
        b'["refused"]\n',
        b'{"pages": -1}\n',
        b'{"refused": "other"}\n',
        b'{"pages": 1, "copy": 5}\nab',
    ],
)
def test_an_answer_that_is_not_one_is_named_as_a_crash(answer):
    # The child's answer is as hostile as the file it read: what PDFium may write, if the file took it over.
    child = subprocess.CompletedProcess([], 0, stdout=answer, stderr=b"")
    with pytest.raises(ValueError):
        upload_check._checked_answer(child)
