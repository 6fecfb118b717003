"""Text recognition (OCR) of a scanned page: PDFium renders it, Tesseract reads it.

Tesseract is Debian's ``tesseract-ocr`` with the English and Simplified/Traditional
Chinese data (the set-up installs them), driven through its CLI with an argv list:
the image goes in on stdin, the text comes out on stdout, no file is written.
The CLI rather than a binding: pytesseract only wraps this same command (through
temporary files), and the CLI is what Debian maintains. No Django here: helper
processes of the extraction worker run it.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
from dataclasses import dataclass

import pypdfium2 as pdfium

LANGUAGES = re.compile(r"[A-Za-z_]+(\+[A-Za-z_]+)*")  # Tesseract's form: eng+chi_sim+chi_tra
MAX_PIXELS = 40_000_000  # a huge page is rendered smaller rather than swelling past the memory limit
# Tesseract puts spaces between CJK characters; Chinese text has none.
_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef"
_CJK_SPACE = re.compile(f"(?<=[{_CJK}]) +(?=[{_CJK}])")


class OcrFailed(Exception):
    """Tesseract could not read the page (it crashed or took too long)."""


@dataclass(frozen=True)
class OcrOptions:
    binary: str
    languages: str  # Tesseract's form: eng+chi_sim+chi_tra
    dpi: int
    page_timeout_s: int


def tesseract_argv(options: OcrOptions) -> list[str]:
    return [options.binary, "stdin", "stdout", "-l", options.languages, "--dpi", str(options.dpi), "--psm", "3"]


def render_png(page: pdfium.PdfPage, dpi: int, max_edge: int = 0) -> bytes:
    """The page as a grayscale PNG at ``dpi`` (smaller for a huge page, or to fit ``max_edge``
    pixels on its long edge when given), its resolution recorded in the file."""
    width, height = page.get_size()  # in points, 72 to the inch
    scale = dpi / 72
    if width * height * scale * scale > MAX_PIXELS:
        scale = (MAX_PIXELS / max(width * height, 1)) ** 0.5
    if max_edge and max(width, height) * scale > max_edge:
        scale = max_edge / max(width, height)
    bitmap = page.render(scale=scale, grayscale=True)
    try:
        buffer = io.BytesIO()
        bitmap.to_pil().save(buffer, format="PNG", dpi=(round(scale * 72), round(scale * 72)))
        return buffer.getvalue()
    finally:
        bitmap.close()


def recognize_png(png: bytes, options: OcrOptions) -> str:
    """A rendered page's text as Tesseract reads it (``options.dpi``: the image's resolution)."""
    # One thread each: the worker already reads pages in several processes.
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        result = subprocess.run(
            tesseract_argv(options),
            input=png,
            capture_output=True,
            timeout=options.page_timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise OcrFailed("timeout") from error
    if result.returncode != 0:
        raise OcrFailed(result.stderr.decode("utf-8", "replace")[-500:])
    return _CJK_SPACE.sub("", result.stdout.decode("utf-8", "replace"))
