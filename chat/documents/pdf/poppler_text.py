"""A PDF's text layers read by Poppler's ``pdftotext``, in several processes at once.

Why Poppler for the text and PDFium (``pages``) for the rest: ``pdftotext`` reads a page about three
times faster (docs/performance.md) and its default mode already reads columns in order. PDFium still
opens the document (its page count, the password and damage checks), looks at the pages whose text
comes back empty (images: a scan, for OCR), and reads any range Poppler fails on, so nothing is lost
when Poppler is missing or stumbles.

The pages are cut into ranges (``page_ranges``); up to ``processes`` pdftotext run at once,
each on one range (``-f``/``-l``, an argv list, output on a pipe, pages ended by form
feeds). A range is given out only when its process has ended well with exactly one form
feed per page: a document whose text itself holds a form feed cannot shift pages, that
range is read by PDFium instead. Ranges come out in page order as they are ready, so
progress moves while later ranges are still read. The processes inherit the extraction
worker's CPU-time and memory limits and its process group; a closed reader ends them.
"""

from __future__ import annotations

import os
import selectors
import subprocess
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

# A range holds at most this many pages: a long document comes out in steps, and a range Poppler fails
# on costs PDFium only this much. Each pdftotext loads the document anew, so ranges are few: one per
# process up to this size.
RANGE_PAGES = 400
_READ_BYTES = 1 << 16


def page_ranges(count: int, processes: int) -> list[tuple[int, int]]:
    """1-based inclusive ranges covering ``count`` pages, enough to keep ``processes`` busy."""
    if count <= 0:
        return []
    size = max(1, min(RANGE_PAGES, -(-count // max(1, processes))))
    return [(first, min(count, first + size - 1)) for first in range(1, count + 1, size)]


def pdftotext_argv(binary: str, path: str, first: int, last: int) -> list[str]:
    # An absolute path: a file name that starts with "-" is never read as an option.
    return [binary, "-q", "-enc", "UTF-8", "-f", str(first), "-l", str(last), os.path.abspath(path), "-"]


def split_pages(output: bytes, pages: int) -> list[str] | None:
    """One text per page of a range's output, or None when it does not have ``pages`` form feeds."""
    parts = output.split(b"\f")
    if len(parts) != pages + 1 or parts[-1].strip():
        return None
    return [part.decode("utf-8", errors="replace") for part in parts[:-1]]


@dataclass
class _Range:
    first: int
    last: int
    process: subprocess.Popen | None = None
    chunks: list[bytes] = field(default_factory=list)
    texts: list[str] | None = None
    done: bool = False


def read_ranges(binary: str, path: str, count: int, processes: int) -> Iterator[tuple[int, int, list[str] | None]]:
    """``(first page, last page, texts)`` for each range in page order; texts None where pdftotext failed."""
    waiting = deque(_Range(first, last) for first, last in page_ranges(count, processes))
    order = deque(waiting)
    running: dict[int, _Range] = {}  # by the pipe's file descriptor
    selector = selectors.DefaultSelector()
    try:
        while order:
            while waiting and len(running) < processes:
                part = waiting.popleft()
                part.process = subprocess.Popen(
                    pdftotext_argv(binary, path, part.first, part.last),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                )
                running[part.process.stdout.fileno()] = part
                selector.register(part.process.stdout, selectors.EVENT_READ)
            while order and order[0].done:
                part = order.popleft()
                yield part.first, part.last, part.texts
            if running:
                _read_some(selector, running)
    finally:
        for part in running.values():
            part.process.kill()
            part.process.wait()
            part.process.stdout.close()
        selector.close()


def _read_some(selector: selectors.BaseSelector, running: dict[int, _Range]) -> None:
    for key, _events in selector.select():
        part = running[key.fd]
        data = os.read(key.fd, _READ_BYTES)
        if data:
            part.chunks.append(data)
            continue
        selector.unregister(key.fileobj)
        del running[key.fd]
        part.process.stdout.close()
        ended_well = part.process.wait() == 0
        pages = part.last - part.first + 1
        part.texts = split_pages(b"".join(part.chunks), pages) if ended_well else None
        part.chunks, part.done = [], True
