"""Settings of documents: uploads, extraction, OCR and whole-document summaries (part of ``settings``)."""

from __future__ import annotations

import os
from pathlib import Path

from qwenweb.env import VAR_DIR, env_bool, env_int

# Documents: uploads, extraction and whole-document summaries.
DOCUMENT_DIR = Path(os.environ.get("QWENWEB_DOCUMENT_DIR", VAR_DIR / "documents"))
DOCUMENT_MAX_BYTES = env_int("QWENWEB_DOCUMENT_MAX_BYTES", 50 * 1024 * 1024)
DOCUMENT_MAX_PAGES = env_int("QWENWEB_DOCUMENT_MAX_PAGES", 2000)
DOCUMENT_SUMMARY_TOKENS = env_int("QWENWEB_DOCUMENT_SUMMARY_TOKENS", 512)  # each partial summary at most
DOCUMENT_CHUNK_TOKENS = env_int("QWENWEB_DOCUMENT_CHUNK_TOKENS", 0)  # 0: as much as one slot's context holds
# A document whose worker is silent this long is run again, up to DOCUMENT_MAX_ATTEMPTS runs, then failed.
DOCUMENT_STALL_S = env_int("QWENWEB_DOCUMENT_STALL_S", 60)
DOCUMENT_MAX_ATTEMPTS = env_int("QWENWEB_DOCUMENT_MAX_ATTEMPTS", 3)
# The extraction child's limits; no new page for STALL_S: it hangs, ended.
DOCUMENT_EXTRACT_CPU_S = env_int("QWENWEB_DOCUMENT_EXTRACT_CPU_S", 300)
DOCUMENT_EXTRACT_MEMORY_MB = env_int("QWENWEB_DOCUMENT_EXTRACT_MEMORY_MB", 2048)
DOCUMENT_EXTRACT_STALL_S = env_int("QWENWEB_DOCUMENT_EXTRACT_STALL_S", 60)
# Processes reading text layers (pdftotext) and scanned pages (OCR) at once.
DOCUMENT_EXTRACT_PROCESSES = env_int("QWENWEB_DOCUMENT_EXTRACT_PROCESSES", min(4, os.cpu_count() or 1))
# Poppler's pdftotext reads PDF text layers; missing (or ""): PDFium, more slowly.
DOCUMENT_PDFTOTEXT_BINARY = os.environ.get("QWENWEB_DOCUMENT_PDFTOTEXT_BINARY", "pdftotext")
DOCUMENT_DOCX_MAX_UNCOMPRESSED_BYTES = env_int(  # a DOCX (a zip) unpacking to more is refused
    "QWENWEB_DOCUMENT_DOCX_MAX_UNCOMPRESSED_BYTES", 100 * 1024 * 1024
)
# Text recognition (OCR) of scanned pages: Tesseract's CLI, its languages ("+"-joined), the render resolution.
DOCUMENT_OCR = env_bool("QWENWEB_DOCUMENT_OCR", True)
DOCUMENT_OCR_BINARY = os.environ.get("QWENWEB_DOCUMENT_OCR_BINARY", "tesseract")
DOCUMENT_OCR_LANGUAGES = os.environ.get("QWENWEB_DOCUMENT_OCR_LANGUAGES", "eng+chi_sim+chi_tra")
DOCUMENT_OCR_DPI = env_int("QWENWEB_DOCUMENT_OCR_DPI", 300)
DOCUMENT_OCR_PAGE_S = env_int("QWENWEB_DOCUMENT_OCR_PAGE_S", 45)  # a page's OCR, then left out (< EXTRACT_STALL_S)
# Scanned pages read by the model itself: a PNG this long on its long edge; its text cut at these characters and tokens.
DOCUMENT_VISION_MAX_EDGE = env_int("QWENWEB_DOCUMENT_VISION_MAX_EDGE", 1280)
DOCUMENT_VISION_PAGE_CHARS = env_int("QWENWEB_DOCUMENT_VISION_PAGE_CHARS", 12000)
DOCUMENT_VISION_MAX_TOKENS = env_int("QWENWEB_DOCUMENT_VISION_MAX_TOKENS", 2048)
