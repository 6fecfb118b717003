"""The child process that reads one document's pages, under CPU-time and memory limits.

``python -m chat.documents.extract_worker PATH KIND CPU_SECONDS MEMORY_MB PROCESSES SCAN_IMAGE_EDGE SETTINGS``
(SCAN_IMAGE_EDGE 0: scans are read by OCR here; else rendered as PNG, base64 in the page's
``image``, for the model to read in the worker, since this process never talks to the network): the
limits (``child_limits``) are set before the file's reader (PDFium, python-docx, BeautifulSoup) is
loaded, so a file that makes it spin or swell ends this process only; the processes it starts (PROCESSES at most of each:
pdftotext over page ranges, helpers reading scans), and the OCR engine they run, inherit the
same limits, each its own. Each page goes to stdout as one JSON line; a refusal the person should read
is a last line ``{"error": ...}``. Exit codes the parent reads: 0 done, MEMORY_EXIT out of
memory; killed by SIGXCPU: out of CPU time; any other death: the reader crashed.

SETTINGS (JSON, from ``sandbox.reading_settings``) are the few settings the reading uses and the
language of its messages (the caller's active one; the worker's is LANGUAGE_CODE): this process
configures Django with them and no apps, as loading the project's took more than a second of each
document's reading. Its environment holds none of the app's settings (``sandbox.child_environment``).
"""

from __future__ import annotations

import base64
import json
import logging
import sys
from pathlib import Path

from django.apps import apps
from django.conf import settings

from chat.documents.child_limits import MEMORY_EXIT, limit_resources
from chat.documents.extraction import extract_pages  # its readers are imported when a file is read
from chat.errors import DocumentError


def main(argv: list[str]) -> int:
    path, kind, cpu_seconds, memory_mb, processes = argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5])
    scan_image_edge = int(argv[6])
    limit_resources(cpu_seconds, memory_mb)
    # Its warnings (a pdftotext range PDFium read instead) go to the worker's log, on its stderr.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings.configure(USE_I18N=True, INSTALLED_APPS=[], **json.loads(argv[7]))
    apps.populate([])  # no apps: the translations are the project's locale folder's and Django's
    out = sys.stdout
    try:
        for page in extract_pages(Path(path), kind, processes=processes, scan_image_edge=scan_image_edge):
            item = {"number": page.number, "text": page.text, "scanned": page.scanned, "ocr": page.ocr}
            if page.image:
                item["image"] = base64.b64encode(page.image).decode("ascii")
            out.write(json.dumps(item) + "\n")
            out.flush()
    except DocumentError as error:
        out.write(json.dumps({"error": str(error)}) + "\n")
    except MemoryError:  # here or in a helper (re-raised here)
        return MEMORY_EXIT
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
