"""A page's text cut into passages of about ``KNOWLEDGE_PASSAGE_TOKENS`` tokens, overlapping.

Tokens are estimated, not counted: a word of Latin (or Cyrillic...) script costs one token per four
characters (at least one), a Chinese, Japanese or Korean character one token. Counting each page with
the embedder's own tokenizer would cost a request per page in the fair queue; the estimate errs long
for English (about 1.3 tokens a word against 1 to 1.5 measured), and a passage stays far below the
embeddings profile's 2048-token slot either way. Passages never cross a page, so each has one page.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from chat.documents.retrieval import terms

_UNIT = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]|[^\s\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]+")
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Cut:
    page: int
    text: str


def unit_tokens(unit: str) -> int:
    return 1 if len(unit) == 1 else max(1, round(len(unit) / CHARS_PER_TOKEN))


def cut_page(page: int, text: str, size: int, overlap: int) -> list[Cut]:
    """The page's passages: windows of about ``size`` tokens, each starting ``overlap`` tokens before
    the last one's end."""
    spans = [(match.start(), match.end(), unit_tokens(match.group())) for match in _UNIT.finditer(text)]
    cuts: list[Cut] = []
    start = 0
    while start < len(spans):
        end, tokens = start, 0
        while end < len(spans) and (tokens + spans[end][2] <= size or end == start):
            tokens += spans[end][2]
            end += 1
        cuts.append(Cut(page, text[spans[start][0] : spans[end - 1][1]].strip()))
        if end >= len(spans):
            break
        back, kept = end, 0
        while back > start + 1 and kept + spans[back - 1][2] <= overlap:
            back -= 1
            kept += spans[back][2]
        start = back
    return cuts


def cut_pages(pages: Iterable[tuple[int, str]], size: int, overlap: int) -> list[Cut]:
    return [cut for number, text in pages for cut in cut_page(number, text, size, overlap)]


def fts_terms(text: str) -> str:
    """What goes in (and is asked of) the FTS5 table: words, and single characters and pairs for CJK
    (no spaces between words), as the documents' BM25 ranks them."""
    return " ".join(terms(text))
