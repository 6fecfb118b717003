"""Extraction in a child process (``extract_worker``), so a poison file fails its own document only.

The child has CPU-time and memory limits (``child_limits``); the parent also ends it when no page
comes for DOCUMENT_EXTRACT_STALL_S (a hang uses no CPU) and whenever ``still_wanted`` says the
person cancelled, which is asked at least every POLL_S while the child works. How a limited
child's death is named to the person (``death_message``) is shared with the upload's PDF check
(``pdf.upload_check``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _

from chat.documents.child_limits import MEMORY_EXIT
from chat.documents.page_text import PageText
from chat.errors import DocumentError

POLL_S = 0.5
_EOF = object()
# What the reading reads of the settings (``extraction``, ``formats``, ``pdf.reader``), handed down to
# the child with the locale and the language: it loads neither the project's settings nor its apps.
READING_SETTINGS = (
    "DOCUMENT_DOCX_MAX_UNCOMPRESSED_BYTES",
    "DOCUMENT_OCR",
    "DOCUMENT_OCR_BINARY",
    "DOCUMENT_OCR_LANGUAGES",
    "DOCUMENT_OCR_DPI",
    "DOCUMENT_OCR_PAGE_S",
    "DOCUMENT_PDFTOTEXT_BINARY",
)


class Cancelled(Exception):
    """The person asked to stop reading the document."""


def child_environment() -> dict[str, str]:
    """A reading child's environment: none of the app's settings and secrets (database and Redis
    addresses, keys), so none can turn up in what it writes; where Tesseract's languages are, if set.
    (A limit on faults, not on privileges: it runs as the same user.)"""
    environment = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}
    if "TESSDATA_PREFIX" in os.environ:
        environment["TESSDATA_PREFIX"] = os.environ["TESSDATA_PREFIX"]
    return environment


def reading_settings() -> str:
    values = {name: getattr(settings, name) for name in READING_SETTINGS}
    values["LOCALE_PATHS"] = [str(path) for path in settings.LOCALE_PATHS]
    values["LANGUAGE_CODE"] = translation.get_language() or settings.LANGUAGE_CODE
    return json.dumps(values)


def worker_argv(path: Path, kind: str, scan_image_edge: int = 0) -> list[str]:
    return [
        sys.executable,
        "-m",
        "chat.documents.extract_worker",
        str(path),
        kind,
        str(settings.DOCUMENT_EXTRACT_CPU_S),
        str(settings.DOCUMENT_EXTRACT_MEMORY_MB),
        str(settings.DOCUMENT_EXTRACT_PROCESSES),
        str(scan_image_edge),
        reading_settings(),
    ]


def _pump(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(_EOF)


def _end_group(child: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # all gone already
        os.killpg(child.pid, signal.SIGKILL)


def death_message(returncode: int, *, too_long: bool) -> str:
    if too_long or returncode == -signal.SIGXCPU:
        return _("The file could not be read: it took too long.")
    if returncode == MEMORY_EXIT:
        return _("The file could not be read: it used too much memory.")
    return _("The file could not be read: it crashed the reader.")


def extract_in_child(
    path: Path, kind: str, still_wanted: Callable[[], bool], scan_image_edge: int = 0
) -> Iterator[PageText]:
    """The document's pages, read by a limited child; DocumentError with the reason when it dies.
    ``scan_image_edge``: scans come back rendered (``PageText.image``) instead of read by OCR."""
    # Its own process group: ending it ends its helper processes and OCR engine with it.
    child = subprocess.Popen(
        worker_argv(path, kind, scan_image_edge),
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=settings.BASE_DIR,
        env=child_environment(),
        start_new_session=True,
    )
    lines: queue.Queue = queue.Queue()
    pump = threading.Thread(target=_pump, args=(child.stdout, lines), daemon=True)
    pump.start()
    stall_s = settings.DOCUMENT_EXTRACT_STALL_S
    last_page = last_poll = time.monotonic()
    try:
        while True:
            try:
                line = lines.get(timeout=POLL_S)
            except queue.Empty:
                line = None
            now = time.monotonic()
            if now - last_poll >= POLL_S:
                last_poll = now
                if not still_wanted():
                    raise Cancelled()
            if line is _EOF:
                break
            if line is None:
                if now - last_page > stall_s:  # a hang: ended below, as every child is
                    raise DocumentError(death_message(0, too_long=True))  # still running: no exit code yet
                continue
            item = json.loads(line)
            if "error" in item:
                raise DocumentError(str(item["error"]))
            last_page = now
            image = base64.b64decode(item["image"]) if isinstance(item.get("image"), str) else b""
            yield PageText(int(item["number"]), str(item["text"]), bool(item["scanned"]), bool(item.get("ocr")), image)
        if child.wait() != 0:
            raise DocumentError(death_message(child.returncode, too_long=False))
    finally:
        _end_group(child)  # helpers of a child that died (out of CPU time) are ended too
        child.wait()
        pump.join(5)  # the pipe ends with the child
        child.stdout.close()
