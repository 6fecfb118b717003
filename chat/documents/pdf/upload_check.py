"""An uploaded PDF's checks (page count, a password's decrypted copy) in a limited child
(``upload_check_worker``): PDFium never parses an upload inside the web process."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from django.conf import settings
from django.utils.translation import gettext as _

from chat.documents.pdf import opening
from chat.documents.pdf.reader import pdf_refusal
from chat.documents.sandbox import child_environment, death_message
from chat.errors import DocumentError

CHECK_WORKER = "chat.documents.pdf.upload_check_worker"  # the check's child (tests swap in a stand-in)
log = logging.getLogger(__name__)


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
        if result["refused"] not in (opening.PASSWORD, opening.DAMAGED):
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
            env=child_environment(),
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:  # a hang that uses no CPU: run() has killed the child
        log.warning("An upload's PDF check took longer than %d s and was ended", limit_s)
        raise DocumentError(death_message(0, too_long=True)) from None
    except OSError:  # no process could be started (out of processes or memory)
        log.exception("An upload's PDF check could not start")
        raise DocumentError(_("The file could not be checked right now. Try again in a moment.")) from None
    try:
        refused, pages, copy = _checked_answer(child)
    except (KeyError, ValueError):  # a death, or an answer that is not one
        stderr = child.stderr[-2000:].decode("utf-8", "replace")
        log.warning("An upload's PDF check ended with exit code %s: %s", child.returncode, stderr)
        raise DocumentError(death_message(child.returncode, too_long=False)) from None
    if refused:
        raise pdf_refusal(refused, password)
    return pages, copy or None
