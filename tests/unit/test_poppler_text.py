"""PDF text layers read by Poppler's pdftotext in several processes, PDFium for the rest.

Real pdftotext (poppler-utils, installed by `make test`) on real PDFs made by reportlab.
Where a test must know which ranges pdftotext was run on, the setting points at a small
script that writes its argv to a file and then runs the real pdftotext.
"""

import os
import shutil
import stat
from pathlib import Path

import pytest
from django.test import override_settings

from chat.documents.pdf import poppler_text
from chat.documents.pdf.reader import extract_pdf_pages
from tests.support import pdfs

PDFTOTEXT = shutil.which("pdftotext")
pytestmark = pytest.mark.skipif(PDFTOTEXT is None, reason="poppler-utils is not installed (make test installs it)")


def pdf_file(tmp_path: Path, data: bytes, name: str = "doc.pdf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def logging_pdftotext(tmp_path: Path) -> tuple[str, Path]:
    """A pdftotext that records each argv (one line each) before running the real one."""
    log = tmp_path / "calls.log"
    script = tmp_path / "pdftotext-logged"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {PDFTOTEXT} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), log


def calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_pages_come_out_in_order_from_several_processes(tmp_path, monkeypatch):
    monkeypatch.setattr(poppler_text, "RANGE_PAGES", 2)  # 9 pages: 5 ranges, 3 at a time
    path = pdf_file(tmp_path, pdfs.report_pdf(9))
    binary, log = logging_pdftotext(tmp_path)
    with override_settings(DOCUMENT_PDFTOTEXT_BINARY=binary):
        pages = list(extract_pdf_pages(path, processes=3))
    assert [page.number for page in pages] == list(range(1, 10))
    assert all(page.text.startswith(f"Page {page.number} is about ") for page in pages)
    ranges = sorted(tuple(int(x) for x in line.split()[4:7:2]) for line in calls(log))
    assert ranges == [(1, 2), (3, 4), (5, 6), (7, 8), (9, 9)]


def test_reading_order_through_poppler(tmp_path):
    """Two columns, columns drawn line by line across the page, and CJK: as PDFium's path reads them."""
    (page,) = extract_pdf_pages(pdf_file(tmp_path, pdfs.two_column_pdf()))
    numbers = [int(part[:2]) for part in page.text.split("Paragraph ")[1:]]
    assert numbers == sorted(numbers) and len(numbers) >= 10
    (page,) = extract_pdf_pages(pdf_file(tmp_path, pdfs.interleaved_columns_pdf()))
    lines = page.text.split("\n")
    left = [i for i, line in enumerate(lines) if "Left" in line]
    right = [i for i, line in enumerate(lines) if "Right" in line]
    assert len(left) == len(right) == 12 and max(left) < min(right)
    cjk = [page.text for page in extract_pdf_pages(pdf_file(tmp_path, pdfs.cjk_pdf()), processes=2)]
    assert cjk == [
        "这是一份关于灯塔的报告。灯塔在海边。",
        "これは灯台の報告書です。",
        "이것은 등대에 관한 보고서입니다.",
    ]


def test_a_page_with_no_text_is_still_found_to_be_a_scan(tmp_path):
    path = pdf_file(tmp_path, pdfs.scanned_page_pdf(text_pages=2, scanned_at=(2,)))
    binary, log = logging_pdftotext(tmp_path)
    with override_settings(DOCUMENT_PDFTOTEXT_BINARY=binary):
        pages = list(extract_pdf_pages(path, processes=2))
    assert calls(log)  # Poppler read the text
    assert [(p.number, p.scanned, bool(p.text)) for p in pages] == [
        (1, False, True),
        (2, True, False),
        (3, False, True),
    ]


def test_a_blank_page_is_empty_and_not_a_scan(tmp_path):
    path = pdf_file(tmp_path, pdfs.text_pdf([["First page."], [], ["Third page."]]))
    pages = list(extract_pdf_pages(path, processes=2))
    assert [(p.number, p.text, p.scanned) for p in pages] == [
        (1, "First page.", False),
        (2, "", False),
        (3, "Third page.", False),
    ]


def test_form_feeds_cut_pages_and_a_wrong_count_is_refused():
    assert poppler_text.split_pages(b"one\n\f\f\xe4\xb8\x89\n\f", 3) == ["one\n", "", "三\n"]
    assert poppler_text.split_pages(b"one\fstray\ftwo\f", 2) is None  # a form feed inside a page's text
    assert poppler_text.split_pages(b"one\ftwo", 2) is None  # cut short
    assert poppler_text.page_ranges(5, 2) == [(1, 3), (4, 5)]
    assert poppler_text.page_ranges(1, 4) == [(1, 1)]
    assert poppler_text.page_ranges(0, 2) == []


def test_control_characters_are_cleaned_as_before(tmp_path):
    """A stand-in for pdftotext (named as such: reportlab cannot put control characters in a
    text layer) writes what a hostile document's text could hold; it is cleaned as PDFium's is."""
    path = pdf_file(tmp_path, pdfs.report_pdf(2))
    script = tmp_path / "pdftotext-controls"
    script.write_text("#!/bin/sh\nprintf 'Bell\\007 and\\033[31m red  \\r\\n\\fsecond\\000 page\\f'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with override_settings(DOCUMENT_PDFTOTEXT_BINARY=str(script)):
        pages = list(extract_pdf_pages(path, processes=1))
    assert [p.text for p in pages] == ["Bell and[31m red", "second page"]


@pytest.mark.parametrize("binary", ["/nonexistent/pdftotext", "", "/bin/false"])
def test_pdftotext_missing_or_failing_falls_back_to_pdfium(tmp_path, binary):
    path = pdf_file(tmp_path, pdfs.report_pdf(4))
    expected = list(extract_pdf_pages(path.read_bytes()))  # PDFium's own reading
    with override_settings(DOCUMENT_PDFTOTEXT_BINARY=binary):
        pages = list(extract_pdf_pages(path, processes=2))
    assert pages == expected and [p.number for p in pages] == [1, 2, 3, 4]
    assert pages[2].text.startswith("Page 3 is about ")


def test_a_pdf_with_a_password_is_read_by_pdfium_only(tmp_path):
    path = pdf_file(tmp_path, pdfs.text_pdf([["Secret plans for the harbour."]], encrypt_password="s3cret"))
    binary, log = logging_pdftotext(tmp_path)
    with override_settings(DOCUMENT_PDFTOTEXT_BINARY=binary):
        (page,) = extract_pdf_pages(path, "s3cret", processes=2)
    assert page.text == "Secret plans for the harbour."
    assert calls(log) == []  # the password never reached a command line


def pdftotext_children() -> list[int]:
    """This process's children that are pdftotext, running or not yet waited for."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
            name = stat_file.read_text().split("(", 1)[1].rsplit(")", 1)[0]
        except (OSError, IndexError):  # gone meanwhile
            continue
        if int(fields[1]) == os.getpid() and name.startswith("pdftotext"):
            found.append(int(stat_file.parent.name))
    return found


def test_a_reader_closed_early_ends_its_processes(tmp_path, monkeypatch):
    monkeypatch.setattr(poppler_text, "RANGE_PAGES", 1)
    path = pdf_file(tmp_path, pdfs.report_pdf(6))
    ranges = poppler_text.read_ranges(PDFTOTEXT, str(path), 6, 2)
    first, last, texts = next(ranges)
    assert (first, last) == (1, 1) and texts[0].startswith("Page 1 is about ")
    assert pdftotext_children()  # pages 2 and 3 were started before page 1 came out
    ranges.close()  # the generator's finally: the running pdftotext are killed and waited for
    assert pdftotext_children() == []
