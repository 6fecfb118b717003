"""The child process that opens an uploaded PDF for the upload's checks, under the extraction's
CPU-time and memory limits (``extract_worker.limit_resources``): PDFium parsing a hostile file
inside the web process could crash it or make it swell, and every chat it serves with it.

``python -m chat.documents.pdf_check_worker PATH MAX_PAGES CPU_SECONDS MEMORY_MB``. The password,
when there is one, is stdin's first line (never an argument: every user of the box can read a
process's arguments). A password-protected PDF of 1 to MAX_PAGES pages that opens with it is
written without its encryption to PATH + ".open". One JSON line on stdout: ``{"pages": N}``, or
``{"refused": REASON}`` (``pdf_open``'s reasons, which the parent words in the person's language).
It loads PDFium and nothing else (no Django), so it starts in a fraction of a second. Exit codes as
``extract_worker``'s: 0, MEMORY_EXIT, or a death the parent names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from chat.documents.extract_worker import MEMORY_EXIT, limit_resources


def main(argv: list[str]) -> int:
    path, max_pages = Path(argv[1]), int(argv[2])
    limit_resources(int(argv[3]), int(argv[4]))
    password = sys.stdin.readline().rstrip("\n") or None
    from chat.documents import pdf_open

    try:
        pdf = pdf_open.open_document(path.read_bytes(), password)
        try:
            pages = len(pdf)
            if password and 0 < pages <= max_pages:
                path.with_name(path.name + ".open").write_bytes(pdf_open.decrypted_copy(pdf))
        finally:
            pdf.close()
        result: dict = {"pages": pages}
    except pdf_open.Refused as refused:
        result = {"refused": refused.reason}
    except MemoryError:
        return MEMORY_EXIT
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
