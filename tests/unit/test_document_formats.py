"""Scanned pages read by OCR (Tesseract, which the set-up installs), DOCX and HTML sections,
the upload border's sniffing and zip-bomb cap, and pages read by several processes."""

import time
import tracemalloc

import pytest
from django.test import override_settings
from django.utils import translation

from chat.documents import formats, ingest, selectors, uploads
from chat.documents.pdf import reader
from chat.documents.pdf.reader import extract_pdf_pages, ocr_options
from chat.documents.uploads import check_upload
from chat.errors import DocumentError
from chat.models import Document, DocumentChunk
from tests.support import client, office, pdfs

ENGLISH = ["The lighthouse keeper wrote a report.", "Storms reached the harbour in March."]
CHINESE = ["这是一份关于灯塔的报告。", "今年的预算增加了。"]


def test_scanned_pages_are_read_by_ocr_in_english_and_chinese():
    options = ocr_options()
    assert options is not None, "tesseract is not installed (make test installs it)"
    pages = list(extract_pdf_pages(pdfs.image_text_pdf([ENGLISH, CHINESE]), ocr_with=options))
    assert [(p.number, p.scanned, p.ocr) for p in pages] == [(1, True, True), (2, True, True)]
    assert "lighthouse keeper" in pages[0].text and "harbour in March" in pages[0].text
    chinese = "".join(pages[1].text.split())
    assert "灯塔的报告" in chinese and "预算增加" in chinese


def test_one_scanned_page_is_named_in_the_singular_in_english_and_chinese():
    """Page 2 of three is a scan (page 1 and 3 typed text): the note names one page, not "Pages 2 are"."""
    user = client.make_user()
    data = pdfs.image_text_pdf([["Typed text on page one."], ENGLISH, ["Typed text on page three."]], (1, 3))
    document = uploads.create_document(user, None, "mixed.pdf", data)
    assert ingest.ingest(document.id) is True
    document.refresh_from_db()
    assert document.scanned_pages == [2] and document.ocr_pages == [2]
    note = "Page 2 is a scanned image; its text was read by text recognition (OCR) and may contain errors."
    assert selectors.document_payload(document)["scanned_note"] == note
    with translation.override("zh-hans"):
        assert (
            selectors.document_payload(document)["scanned_note"]
            == "第 2 页是扫描图像；其文字由文字识别（OCR）读取，可能有误。"
        )
    several = "Pages 2, 5 are scanned images; their text was read by text recognition (OCR) and may contain errors."
    assert selectors.scanned_note([2, 5], [2, 5]) == several


def test_ingest_marks_pages_read_by_ocr(monkeypatch):
    user = client.make_user()
    data = pdfs.image_text_pdf([ENGLISH])
    document = uploads.create_document(user, None, "scan.pdf", data)
    assert ingest.ingest(document.id) is True
    document.refresh_from_db()
    assert document.scanned_pages == [1] and document.ocr_pages == [1]
    assert "lighthouse keeper" in document.pages.get(number=1).text
    note = selectors.document_payload(document)["scanned_note"]
    assert note.startswith("Page 1 is a scanned image; its text was read by text recognition (OCR)")
    chunk = DocumentChunk(document=document, level=0, index=0, first_page=1, last_page=1, text="", tokens=1)
    assert chunk.pages_label == "p. 1 (OCR)"


def test_docx_is_cut_into_sections_at_headings():
    sections = formats.docx_sections(office.docx_with_headings(intro="Preface."))
    assert sections[0] == "§ 1\nPreface."
    assert sections[1].startswith("§ 2 Harbour lights\nThe lighthouse keeper lit the lamp")
    assert sections[3].endswith("Lamp oil | 40 litres")  # tables are kept, row by row
    assert len(sections) == 4


def test_html_keeps_text_only_and_cuts_sections_at_headings():
    sections = formats.html_sections(formats.html_text(office.html_page()))
    assert sections[0] == "§ 1\nIntroduction to the report."
    assert sections[1] == "§ 2 Harbour lights\nThe lighthouse keeper lit the lamp every night of the year."
    joined = "\n".join(sections)
    assert "stolen-secret-script" not in joined and "color: red" not in joined and "alert" not in joined


def test_sectioned_documents_cite_sections():
    user = client.make_user()
    document = uploads.create_document(user, None, "report.docx", office.docx_with_headings())
    assert document.kind == Document.Kind.DOCX and document.page_count == 3
    chunk = DocumentChunk(document=document, level=0, index=0, first_page=1, last_page=3, text="", tokens=1)
    assert chunk.pages_label == "§§ 1–3"


@pytest.mark.parametrize(
    "name,data,message",
    [
        ("report.docx", b"PK\x03\x04" + b"\x00" * 100, "This file is not a Word document (.docx)"),
        ("report.docx", b"just some text", "This file is not a Word document (.docx)"),
        ("page.html", b"\x00\x01binary" * 10, "This file is not HTML, whatever its name says."),
        ("page.html", b"plain words, no markup", "This file is not HTML, whatever its name says."),
        ("page.html", b"<html><body><script>x()</script></body></html>", "This document contains no text."),
    ],
)
def test_content_must_be_what_the_name_says(name, data, message):
    with pytest.raises(DocumentError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        check_upload(name, data)


def test_docx_zip_bomb_is_refused_before_it_is_inflated():
    with pytest.raises(DocumentError, match="unpacks to more than 100 MB"):
        check_upload("bomb.docx", office.docx_zip_bomb())


def test_scans_read_by_helper_processes_come_in_page_order(monkeypatch):
    import pypdfium2 as pdfium

    # The product forks its helpers from the extraction worker, a fresh single-threaded process.
    # This test's process has threads and Celery's Redis connections (other tests' stacks), which
    # a forked child tries to close and can hang on: spawn here; the ordering logic is the same,
    # and the forked path runs in the integration tests, through the real worker.
    monkeypatch.setattr(reader, "START_METHOD", "spawn")

    merged = pdfium.PdfDocument.new()
    for part in (pdfs.report_pdf(2), pdfs.image_text_pdf([ENGLISH, CHINESE]), pdfs.report_pdf(2)):
        source = pdfium.PdfDocument(part)
        merged.import_pages(source)
        source.close()
    path = uploads.document_dir() / "helpers-test.pdf"
    merged.save(str(path))
    merged.close()
    try:
        alone = list(extract_pdf_pages(path, ocr_with=ocr_options()))
        shared = list(extract_pdf_pages(path, processes=2, ocr_with=ocr_options()))
    finally:
        path.unlink()
    assert [(p.number, p.ocr) for p in shared] == [(1, False), (2, False), (3, True), (4, True), (5, False), (6, False)]
    assert shared == alone


def test_ocr_languages_from_the_environment_are_checked():
    with override_settings(DOCUMENT_OCR_LANGUAGES="eng+chi_sim"):
        assert ocr_options().languages == "eng+chi_sim"
    with override_settings(DOCUMENT_OCR_LANGUAGES="eng --user-patterns /etc/passwd"):
        assert ocr_options() is None


def test_docx_whose_headers_lie_about_its_size_is_refused_without_inflating_it():
    """The declared sizes are the zip's word, not its content: a part that inflates past what its headers
    say is refused while it is read in small pieces, before python-docx would inflate it whole in the
    web process (where check_upload runs, with no memory limit of its own)."""
    bomb = office.docx_lying_about_its_size()
    tracemalloc.start()
    try:
        with pytest.raises(DocumentError, match="damaged|unpacks to more than"):
            check_upload("bomb.docx", bomb)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 * 1024 * 1024


def test_deeply_nested_html_is_read_in_one_pass():
    """check_upload reads an HTML page in the web process: its cost must grow with the page, not with
    its size times its nesting depth (30,000 nested <div>s took about 40 s of CPU there before)."""
    depth = 30_000
    page = ("<html><body><h1>Deep</h1>" + "<div>" * depth + "core text" + "</div>" * depth + "</body></html>").encode()
    started = time.process_time()
    kind, pages, _data = check_upload("deep.html", page)
    assert (kind, pages) == (Document.Kind.HTML, 1)
    assert formats.html_sections(formats.html_text(page)) == ["§ 1 Deep\ncore text"]
    assert time.process_time() - started < 10  # about 0.5 s; quadratic, it was minutes
