"""Document extraction beside pdftotext, and whole-document summary time with 1 and 2 slots.

Part 1: a generated corpus (122 pages: prose, two-column and CJK pages) is read by our
extraction (``extract_pdf_pages`` as the extraction worker runs it: text layers by
pdftotext over page ranges in DOCUMENT_EXTRACT_PROCESSES processes, PDFium for the page
count and pages with no text) and by poppler's ``pdftotext`` on the whole file (one
process), alternating, 7 runs each; prints pages per second of each (medians) and
``extract_ratio=`` (ours ÷ pdftotext in speed: the median of the per-run ratios, with
their spread, min–max). The same for a 400-page report, ``extract_ratio_400p=``: each
process costs a few milliseconds to start and load the file, so the small corpus is the
harder case and stays the headline figure. Then image-only pages (English and Chinese, drawn by Pillow) are read
by OCR (Tesseract, in the helpers): ``ocr_pages_per_s=``, the median of 3 runs.

Part 2: a 100-page document is summarized end to end (the worker's ``run_summary``:
token counts, chunking, map and reduce calls) against a real llama-server with
``--parallel 1`` and then ``--parallel 2``, the same 4096-token context per slot.
To finish in minutes on a 2-core box, its pages are short (about 25 words each),
chunks are capped at 800 tokens and partial summaries at 96 tokens; it prints
``summary_1slot_s=`` and ``summary_2slot_s=``.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ.setdefault("QWENWEB_DOCUMENT_CHUNK_TOKENS", "800")
os.environ.setdefault("QWENWEB_DOCUMENT_SUMMARY_TOKENS", "96")

from tests.support import stack  # noqa: E402

RUNS = 7
OCR_RUNS = 3
SUMMARY_PAGES = 100


def corpus_pdf() -> bytes:
    """120 pages: 100 of prose, 10 two-column, 10 CJK, merged with pypdfium2."""
    import pypdfium2 as pdfium

    from tests.support import pdfs

    parts = [pdfs.report_pdf(100, words_per_page=300, seed=5)]
    parts += [pdfs.two_column_pdf() for _ in range(10)]
    cjk = pdfs.cjk_pdf()
    parts += [cjk for _ in range(4)]
    merged = pdfium.PdfDocument.new()
    for data in parts:
        source = pdfium.PdfDocument(data)
        merged.import_pages(source)
        source.close()
    buffer = io.BytesIO()
    merged.save(buffer)
    merged.close()
    return buffer.getvalue()


def ours(path: Path) -> int:
    from django.conf import settings

    from chat.documents.pdf.reader import extract_pdf_pages

    pages = list(extract_pdf_pages(path, processes=settings.DOCUMENT_EXTRACT_PROCESSES))
    assert pages and sum(len(p.text) for p in pages) > 1000
    return len(pages)


def pdftotext(path: Path, binary: str) -> int:
    result = subprocess.run([binary, "-enc", "UTF-8", str(path), "-"], check=True, capture_output=True)
    return result.stdout.count(b"\f")


def compare(path: Path, binary: str, label: str) -> None:
    """Prints ``extract_{label}...`` figures: ours beside pdftotext on ``path``, alternating."""
    from django.conf import settings

    ours(path), pdftotext(path, binary)  # warm both (page cache, PDFium's font tables)
    ours_s, ref_s = [], []
    pages = ref_pages = 0
    for _ in range(RUNS):
        started = time.perf_counter()
        pages = ours(path)
        ours_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        ref_pages = pdftotext(path, binary)
        ref_s.append(time.perf_counter() - started)
    assert ref_pages == pages, (ref_pages, pages)
    ratios = sorted(ref / mine for ref, mine in zip(ref_s, ours_s, strict=True))
    print(f"extract{label}_pages={pages}")
    print(f"extract{label}_processes={settings.DOCUMENT_EXTRACT_PROCESSES} (cpus={os.cpu_count()})")
    print(f"extract{label}_ours_pages_per_s={pages / statistics.median(ours_s):.0f}")
    print(f"extract{label}_pdftotext_pages_per_s={pages / statistics.median(ref_s):.0f}")
    print(f"extract_ratio{label}={statistics.median(ratios):.2f}")
    print(f"extract_ratio{label}_spread={ratios[0]:.2f}-{ratios[-1]:.2f} ({RUNS} runs)", flush=True)


def extraction_part() -> None:
    from tests.support import pdfs

    binary = shutil.which("pdftotext")
    if binary is None:
        print("extract_ratio=skipped (pdftotext not installed: apt-get install poppler-utils)")
        return
    for data, label in ((corpus_pdf(), ""), (pdfs.report_pdf(400, words_per_page=300, seed=7), "_400p")):
        path = Path(tempfile.mkstemp(suffix=".pdf")[1])
        path.write_bytes(data)
        try:
            compare(path, binary, label)
        finally:
            path.unlink()


def ocr_part() -> None:
    from django.conf import settings

    from chat.documents.pdf.reader import extract_pdf_pages, ocr_options
    from tests.support import pdfs

    options = ocr_options()
    if options is None:
        print("ocr_pages_per_s=skipped (tesseract not installed: apt-get install tesseract-ocr)")
        return
    english = ["The lighthouse keeper wrote a report.", "Storms reached the harbour in March."]
    chinese = ["这是一份关于灯塔的报告。", "今年的预算增加了。"]
    data = pdfs.image_text_pdf([english, chinese] * 3)
    path = Path(tempfile.mkstemp(suffix=".pdf")[1])
    path.write_bytes(data)
    rates = []
    for _ in range(OCR_RUNS):
        started = time.perf_counter()
        pages = list(extract_pdf_pages(path, processes=settings.DOCUMENT_EXTRACT_PROCESSES, ocr_with=options))
        rates.append(len(pages) / (time.perf_counter() - started))
        assert all(page.ocr and page.text for page in pages)
    rates.sort()
    print(f"ocr_pages_per_s={statistics.median(rates):.2f}")
    print(f"ocr_pages_per_s_spread={rates[0]:.2f}-{rates[-1]:.2f} ({OCR_RUNS} runs of {len(pages)} pages)", flush=True)
    path.unlink()


def summary_seconds(run_dir: Path, slots: int) -> float:
    from chat.documents import pipeline, uploads
    from chat.models import Document
    from monitor.llama.serving import forget_serving_info
    from monitor.profiles.selectors import find_profile
    from monitor.profiles.services import save_profile
    from tests.support import pdfs
    from tests.support.client import make_user

    # The default profile with 1 or 2 slots of 4096 tokens each; llama-server starts with it.
    profile = find_profile(None)
    profile.parallel, profile.ctx_size = slots, 4096 * slots
    save_profile(profile)
    profile.placements.update(live_revision=None, live_options=[])  # nothing served yet: it starts with these
    llama = stack.start_llama(run_dir)
    forget_serving_info()
    try:
        rng = random.Random(11)
        data = pdfs.text_pdf(
            [
                [f"Page {n} is about {pdfs.topic(n)}.", " ".join(rng.choice(pdfs.WORDS) for _ in range(20))]
                for n in range(1, SUMMARY_PAGES + 1)
            ]
        )
        document = uploads.create_document(make_user(), None, "bench.pdf", data, language="en")
        started = time.perf_counter()
        status = pipeline.ingest_and_summarize(document.id)
        elapsed = time.perf_counter() - started
        document = Document.objects.get(id=document.id)
        assert status == "ready", document.error
        chunks = document.chunks.filter(level=0).count()
        print(f"summary_{slots}slot_chunks={chunks}")
        return elapsed
    finally:
        llama.stop()


def summary_part(run_dir: Path) -> None:
    redis = stack.start_redis(run_dir)
    try:
        for slots in (1, 2):
            print(f"summary_{slots}slot_s={summary_seconds(run_dir, slots):.1f}", flush=True)
    finally:
        redis.stop()


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-")
    try:
        if "--summary-only" not in sys.argv:
            extraction_part()
            ocr_part()
        if "--extract-only" not in sys.argv:
            summary_part(run_dir)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
