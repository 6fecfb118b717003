"""Extraction and the upload border, on real PDFs made by reportlab (no services needed)."""

import time
import tracemalloc
from pathlib import Path

import pytest
from django.test import override_settings

from chat.documents import extraction, heartbeats, ingest, selectors, uploads
from chat.documents.languages import detect_language
from chat.documents.page_text import clean_text
from chat.documents.pdf.reader import extract_pdf_pages
from chat.documents.retrieval import rank_passages, split_passages
from chat.documents.uploads import check_upload
from chat.errors import DocumentError, PasswordNeeded
from chat.models import Document, DocumentPage
from tests.support import client, pdfs


def texts(data: bytes) -> list[str]:
    return [page.text for page in extract_pdf_pages(data)]


def test_cjk_pages_extract_as_text():
    pages = texts(pdfs.cjk_pdf())
    assert pages == [
        "这是一份关于灯塔的报告。灯塔在海边。",
        "これは灯台の報告書です。",
        "이것은 등대에 관한 보고서입니다.",
    ]
    assert [detect_language(p) for p in pages] == ["zh-hans", "ja", "ko"]


def test_two_columns_read_left_column_first():
    (page,) = texts(pdfs.two_column_pdf())
    numbers = [int(part[:2]) for part in page.split("Paragraph ")[1:]]
    assert numbers == sorted(numbers) and len(numbers) >= 10


def test_columns_drawn_across_the_page_still_read_by_column():
    (page,) = texts(pdfs.interleaved_columns_pdf())
    lines = page.split("\n")
    left = [i for i, line in enumerate(lines) if "Left" in line]
    right = [i for i, line in enumerate(lines) if "Right" in line]
    assert len(left) == len(right) == 12
    assert max(left) < min(right)
    assert lines[left[0]] == "Left column line 00 alpha"


def test_one_column_page_is_not_split():
    pages = texts(pdfs.report_pdf(1))
    assert pages[0].startswith("Page 1 is about topic001.\n")


def test_image_only_page_is_marked_scanned():
    pages = list(extract_pdf_pages(pdfs.scanned_page_pdf(text_pages=2, scanned_at=(2,))))
    assert [(p.number, p.scanned, bool(p.text)) for p in pages] == [
        (1, False, True),
        (2, True, False),
        (3, False, True),
    ]


def test_encrypted_pdf_asks_for_its_password():
    data = pdfs.text_pdf([["Secret plans for the harbour."]], encrypt_password="s3cret")
    with pytest.raises(PasswordNeeded, match="protected by a password"):
        check_upload("plans.pdf", data)
    with pytest.raises(PasswordNeeded, match="password is not right"):
        check_upload("plans.pdf", data, "wrong")
    kind, pages, kept = check_upload("plans.pdf", data, "s3cret")
    assert (kind, pages) == ("pdf", 1)
    # What is kept opens without any password: the password is needed nowhere later.
    assert texts(kept) == ["Secret plans for the harbour."]
    assert b"s3cret" not in kept


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("broken.pdf", pdfs.corrupt_pdf(), "This PDF is damaged and cannot be read."),
        ("fake.pdf", b"<html><body>not a pdf</body></html>", "This file is not a PDF, whatever its name says."),
        ("notes.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "This file is not text, whatever its name says."),
        ("notes.md", "café".encode("latin-1"), "This file is not UTF-8 text, whatever its name says."),
        ("notes.txt", pdfs.report_pdf(1), "This file is a PDF, not a text file: rename it to .pdf."),
        ("sheet.xlsx", b"PK\x03\x04", "Only PDF, Word (.docx), HTML, TXT and Markdown (.md) files can be read."),
        ("empty.txt", b"", "The file is empty."),
    ],
)
def test_wrong_files_are_refused_with_the_reason(name, data, message):
    with pytest.raises(DocumentError) as caught:
        check_upload(name, data)
    assert str(caught.value) == message


def test_size_and_page_limits_are_named():
    with override_settings(DOCUMENT_MAX_BYTES=1024 * 1024), pytest.raises(DocumentError) as caught:
        check_upload("big.txt", b"x" * (1024 * 1024 + 1))
    assert str(caught.value) == "The file is too large: the limit is 1 MB."
    with override_settings(DOCUMENT_MAX_PAGES=3), pytest.raises(DocumentError) as caught:
        check_upload("long.pdf", pdfs.report_pdf(5))
    assert str(caught.value) == "The document has 5 pages; the limit is 3."


def test_text_files_become_page_sized_blocks():
    text = "\n".join(f"line {i} " + "word " * 20 for i in range(300))
    pages = list(extraction.iter_text_pages(text))
    assert len(pages) > 3 and all(len(p) <= extraction.TEXT_PAGE_CHARS for p in pages)
    assert "\n".join(pages) == clean_text(text)


def test_a_huge_single_line_is_cut_in_linear_time():
    """50 MB on one line: re-slicing the rest of the line for each page copied terabytes."""
    assert list(extraction.iter_text_pages("a" * 6001)) == ["a" * 3000, "a" * 3000, "a"]
    assert list(extraction.iter_text_pages("b\n" + "a" * 3000)) == ["b", "a" * 3000]
    text = "x" * (50 * 1024 * 1024)
    started = time.monotonic()
    count = sum(1 for _page in extraction.iter_text_pages(text))
    assert count == -(-len(text) // extraction.TEXT_PAGE_CHARS)
    assert time.monotonic() - started < 20  # linear: well under a second; quadratic: hours


def test_the_upload_check_holds_the_text_about_once():
    """The check of a 50 MB one-line text holds the decoded text once, and its pages one at a time."""
    data = b"x" * (50 * 1024 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(DocumentError, match="17477 pages"):
            check_upload("one-line.txt", data)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * len(data), f"{peak / 1_048_576:.0f} MB for a 50 MB upload"


@override_settings(DOCUMENT_OCR=False)  # handed down to the extraction child: scans are left out
def test_ingest_stores_pages_and_reports_scans():
    user = client.make_user()
    document = uploads.create_document(user, None, "mixed.pdf", pdfs.scanned_page_pdf(2, (3,)))
    assert uploads.stored_file(document).exists()
    assert ingest.ingest(document.id) is True
    document.refresh_from_db()
    assert document.status == Document.Status.SUMMARIZING and document.scanned_pages == [3]
    assert list(document.pages.values_list("number", flat=True)) == [1, 2, 3]
    assert not uploads.stored_file(document).exists()
    payload = selectors.document_payload(document)
    assert payload["scanned_note"].startswith("Page 3 has no text layer (a scanned image) and was left out")


@override_settings(DOCUMENT_OCR=False)
def test_scan_only_document_fails_and_leaves_nothing():
    user = client.make_user()
    document = uploads.create_document(user, None, "scan.pdf", pdfs.scanned_page_pdf(0, (1, 2)))
    assert ingest.ingest(document.id) is False
    document.refresh_from_db()
    assert document.status == Document.Status.FAILED
    assert document.error.startswith("No page of this document has a text layer (pages 1–2 are scanned images)")
    assert not DocumentPage.objects.filter(document=document).exists()
    assert not Path(uploads.stored_file(document)).exists()


def test_passages_match_questions_in_any_script():
    passages = split_passages("a.pdf", 1, "灯塔在海边。") + split_passages("a.pdf", 2, "The budget of the year.")
    assert [p.page for p in rank_passages("灯塔在哪里？", passages)] == [1]
    assert [p.page for p in rank_passages("What was the budget?", passages)][0] == 2


def test_page_list():
    assert selectors.page_list([1, 2, 3, 5, 7, 8]) == "1–3, 5, 7–8"


def test_one_run_at_a_time_holds_a_document():
    user = client.make_user()
    document = uploads.create_document(user, None, "a.txt", b"hello")
    assert heartbeats.claim(document.id) is True
    assert heartbeats.claim(document.id) is False  # a live run's heartbeat is fresh
    Document.objects.filter(id=document.id).update(status=Document.Status.SUMMARIZING)
    assert heartbeats.claim_stalled(document.id) == Document.Status.SUMMARIZING
    assert heartbeats.claim(document.id) is True  # the run queued for the stalled document may take it
