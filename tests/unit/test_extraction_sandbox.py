"""Extraction in its limited child process: real children, real limits, faults injected for real
(the child is killed or stopped by its pid, found by its argv, while it waits at its file's opening:
a named pipe nobody writes to, so the test races nothing)."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest
from django.test import override_settings
from django.utils import translation

from chat.documents.sandbox import Cancelled, extract_in_child
from chat.errors import DocumentError
from tests.support import office, pdfs


def held_file(tmp_path):
    """A text file whose reader waits at its opening until it is ended: a named pipe nobody writes to
    (read as "txt": PDFium refuses a path that is not a regular file, so a held PDF would not wait)."""
    path = tmp_path / "notes.txt"
    os.mkfifo(path)
    return path


def find_child(path) -> psutil.Process:
    """The extractor child reading ``path``."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for process in psutil.Process().children():
            try:
                if str(path) in process.cmdline():
                    return process
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.01)
    raise AssertionError("no extractor child found")


def read_all(path, kind: str, still_wanted=lambda: True) -> list:
    return list(extract_in_child(path, kind, still_wanted))


def in_background(signal_number, path):
    def act():
        find_child(path).send_signal(signal_number)

    thread = threading.Thread(target=act)
    thread.start()
    return thread


def test_pages_come_back_from_the_child(tmp_path):
    path = tmp_path / "report.pdf"
    path.write_bytes(pdfs.report_pdf(3))
    pages = read_all(path, "pdf")
    assert [page.number for page in pages] == [1, 2, 3] and all(page.text for page in pages)


def test_a_refusal_in_the_child_is_the_documents_message(tmp_path):
    path = tmp_path / "fake.pdf"
    path.write_bytes(b"%PDF-1.4 this is not a pdf")
    with pytest.raises(DocumentError) as caught:
        read_all(path, "pdf")
    assert str(caught.value) == "This PDF is damaged and cannot be read."


def test_the_childs_refusal_is_in_the_callers_language(tmp_path):
    """The child loads none of the project's apps: the language and the settings it reads with are
    handed down, so a caller reading in Chinese is refused in Chinese, at the configured limit."""
    path = tmp_path / "notes.txt"
    path.write_bytes(b"%PDF-1.4 renamed")
    with translation.override("zh-hans"), pytest.raises(DocumentError) as caught:
        read_all(path, "txt")
    assert str(caught.value) == "此文件是 PDF，不是文本文件：请将其重命名为 .pdf。"
    docx = tmp_path / "bomb.docx"
    docx.write_bytes(office.docx_zip_bomb(inflated_mb=3))
    with (
        override_settings(DOCUMENT_DOCX_MAX_UNCOMPRESSED_BYTES=2 * 1024 * 1024),
        pytest.raises(DocumentError) as caught,
    ):
        read_all(docx, "docx")
    assert str(caught.value) == "This Word document unpacks to more than 2 MB; the limit is there to stop zip bombs."


def test_a_crashed_reader_fails_with_its_reason(tmp_path):
    path = held_file(tmp_path)
    killer = in_background(signal.SIGKILL, path)
    with pytest.raises(DocumentError) as caught:
        read_all(path, "txt")
    killer.join()
    assert str(caught.value) == "The file could not be read: it crashed the reader."


@override_settings(DOCUMENT_EXTRACT_STALL_S=2)
def test_a_hung_reader_is_ended(tmp_path):
    path = held_file(tmp_path)
    stopper = in_background(signal.SIGSTOP, path)
    with pytest.raises(DocumentError) as caught:  # a reader never ended would hang here
        read_all(path, "txt")
    stopper.join()
    assert str(caught.value) == "The file could not be read: it took too long."


@override_settings(DOCUMENT_EXTRACT_MEMORY_MB=100)
def test_a_file_that_needs_too_much_memory_fails_alone(tmp_path):
    # 60 MB of Chinese text: read, then decoded (40 MB of UCS-2), and more while it is cut into pages,
    # past 100 MB; a small file's reader needs under 40 MB.
    path = tmp_path / "huge.txt"
    path.write_bytes(("灯塔" * 10_000_000).encode())
    with pytest.raises(DocumentError) as caught:
        read_all(path, "txt")
    assert str(caught.value) == "The file could not be read: it used too much memory."
    # The parent (this process) is untouched and reads the next file.
    small = tmp_path / "small.txt"
    small.write_text("a lighthouse")
    assert [page.text for page in read_all(small, "txt")] == ["a lighthouse"]


def test_cancel_ends_a_held_child(tmp_path):
    """The child is stopped (it would never end by itself) when the reading is no longer wanted: the
    reading ends as cancelled, and the child with it."""
    path = held_file(tmp_path)
    stopper = in_background(signal.SIGSTOP, path)  # the child holds until it is ended
    wanted = threading.Event()
    wanted.set()
    child: list[psutil.Process] = []

    def cancel_once_held():
        stopper.join()  # stopped now
        child.append(find_child(path))
        wanted.clear()

    canceller = threading.Thread(target=cancel_once_held)
    canceller.start()
    with pytest.raises(Cancelled):
        read_all(path, "txt", wanted.is_set)
    canceller.join()
    assert not child[0].is_running() or child[0].status() == psutil.STATUS_ZOMBIE
    assert os.path.exists(path)
