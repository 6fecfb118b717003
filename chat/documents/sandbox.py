"""Extraction in a child process (``extract_worker``), so a poison file fails its own document only.

The child has CPU-time and memory limits; the parent also ends it when no page comes for
DOCUMENT_EXTRACT_STALL_S (a hang uses no CPU) and whenever ``still_wanted`` says the person
cancelled, which is asked at least every POLL_S while the child works.
"""

from __future__ import annotations

import base64
import json
import logging
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
from django.utils.translation import gettext as _

from chat.documents import pdf_open
from chat.documents.extract_worker import MEMORY_EXIT
from chat.documents.extraction import pdf_refusal
from chat.documents.pdf_pages import PageText
from chat.errors import DocumentError

POLL_S = 0.5
CHECK_WORKER = "chat.documents.pdf_check_worker"  # an upload's PDF check (tests swap in a stand-in)
log = logging.getLogger(__name__)
_EOF = object()


class Cancelled(Exception):
    """The person asked to stop reading the document."""


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
    ]


def _pump(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(_EOF)


def _end_group(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # all gone already
        pass


def _death_message(returncode: int, *, too_long: bool) -> str:
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
                if now - last_page > stall_s:
                    _end_group(child)
                    child.wait()
                    raise DocumentError(_death_message(child.returncode, too_long=True))
                continue
            item = json.loads(line)
            if "error" in item:
                raise DocumentError(str(item["error"]))
            last_page = now
            image = base64.b64decode(item["image"]) if isinstance(item.get("image"), str) else b""
            yield PageText(int(item["number"]), str(item["text"]), bool(item["scanned"]), bool(item.get("ocr")), image)
        if child.wait() != 0:
            raise DocumentError(_death_message(child.returncode, too_long=False))
    finally:
        _end_group(child)  # helpers of a child that died (out of CPU time) are ended too
        child.wait()
        pump.join(5)  # the pipe ends with the child
        child.stdout.close()


def _check_environment() -> dict[str, str]:
    """The check's child's environment: none of the web process's settings and secrets, so none can
    turn up in what it writes. (A limit on faults, not on privileges: it runs as the same user.)"""
    return {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}


def _no_constant(name: str):
    raise ValueError(name)  # NaN and Infinity: not a count


def _count(value) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(value)
    return value


def _checked_answer(child: subprocess.CompletedProcess) -> tuple[str | None, int, bytes]:
    """(a refusal's reason, pages, the copy) from the child's answer, which is hostile as the file
    it read is (PDFium may be what the file took over): anything else raises ValueError."""
    if child.returncode != 0:
        raise ValueError(child.returncode)
    head, _newline, copy = child.stdout.partition(b"\n")
    result = json.loads(head, parse_constant=_no_constant)
    if not isinstance(result, dict):
        raise ValueError("not an object")
    if "refused" in result:
        if result["refused"] not in (pdf_open.PASSWORD, pdf_open.DAMAGED):
            raise ValueError("reason")
        return result["refused"], 0, b""
    if len(copy) != _count(result.get("copy", 0)) or len(copy) > settings.DOCUMENT_MAX_BYTES:
        raise ValueError("copy")
    return None, _count(result["pages"]), copy


def check_pdf_in_child(data: bytes, password: str | None) -> tuple[int, bytes | None]:
    """An uploaded PDF's page count, and with a password its copy without the encryption (None when
    it has no pages or more than the limit), from a limited child (``CHECK_WORKER``): PDFium never
    parses an upload inside the web process. The password and the bytes go on the child's stdin.
    DocumentError (PasswordNeeded) with the reason the person reads, in their language; the
    child's death (out of time or memory, a crash) is named as extraction's is, and logged."""
    limit_s = min(settings.DOCUMENT_EXTRACT_CPU_S, settings.DOCUMENT_EXTRACT_STALL_S)
    argv = [sys.executable, "-m", CHECK_WORKER, str(settings.DOCUMENT_MAX_PAGES), str(limit_s)]
    argv.append(str(settings.DOCUMENT_EXTRACT_MEMORY_MB))
    question = json.dumps(password or "").encode() + b"\n" + data
    try:
        child = subprocess.run(
            argv,
            input=question,
            capture_output=True,
            timeout=limit_s,
            cwd=settings.BASE_DIR,
            env=_check_environment(),
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:  # a hang that uses no CPU: run() has killed the child
        log.warning("An upload's PDF check took longer than %d s and was ended", limit_s)
        raise DocumentError(_death_message(0, too_long=True)) from None
    except OSError:  # no process could be started (out of processes or memory)
        log.exception("An upload's PDF check could not start")
        raise DocumentError(_("The file could not be checked right now. Try again in a moment.")) from None
    try:
        refused, pages, copy = _checked_answer(child)
    except (KeyError, ValueError):  # a death, or an answer that is not one
        stderr = child.stderr[-2000:].decode("utf-8", "replace")
        log.warning("An upload's PDF check ended with exit code %s: %s", child.returncode, stderr)
        raise DocumentError(_death_message(child.returncode, too_long=False)) from None
    if refused:
        raise pdf_refusal(refused, password)
    return pages, copy or None
