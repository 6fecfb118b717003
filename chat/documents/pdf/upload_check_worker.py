"""The child process that opens an uploaded PDF for the upload's checks, under the extraction's
CPU-time and memory limits (``child_limits.limit_resources``): PDFium parsing a hostile file
inside the web process could crash it or make it swell, and every chat it serves with it.

``python -m chat.documents.pdf.upload_check_worker MAX_PAGES CPU_SECONDS MEMORY_MB``. Nothing of
the upload is an argument (every user of the box can read a process's arguments) or a file: stdin
holds the password as a JSON string on the first line ("" for none), then the PDF's bytes.
stdout: one JSON line, ``{"pages": N}`` or ``{"refused": REASON}`` (``opening``'s reasons, which
the parent words in the person's language); for a password-protected PDF of 1 to MAX_PAGES pages
that opens with it, ``{"pages": N, "copy": LENGTH}`` and then the copy without its encryption.
It loads PDFium and ``opening`` only (no Django), and the parent gives it no secrets in its
environment. Exit codes as the extraction child's (``extract_worker``): 0, MEMORY_EXIT, or a
death the parent names.
"""

from __future__ import annotations

import json
import sys

from chat.documents.child_limits import MEMORY_EXIT, limit_resources


def main(argv: list[str]) -> int:
    max_pages = int(argv[1])
    limit_resources(int(argv[2]), int(argv[3]))
    # Imported once the limits are set: PDFium is loaded under them.
    from chat.documents.pdf import opening

    copy = b""
    try:
        password = json.loads(sys.stdin.buffer.readline()) or None
        pdf = opening.open_document(sys.stdin.buffer.read(), password)
        try:
            pages = len(pdf)
            if password and 0 < pages <= max_pages:
                copy = opening.decrypted_copy(pdf)
        finally:
            pdf.close()
        result: dict = {"pages": pages, "copy": len(copy)} if copy else {"pages": pages}
    except opening.Refused as refused:
        result = {"refused": refused.reason}
    except MemoryError:
        return MEMORY_EXIT
    sys.stdout.buffer.write(json.dumps(result).encode() + b"\n" + copy)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
