"""Page citations a model wrote about a document, checked against the pages it was given.

Model output is hostile content: a reference to a page outside the part it came from
is corrected when the sentence it ends matches another page of the part, else removed,
so no invented page is ever shown. Forms handled: ``[p. 12]``, ``(pp. 3-5)``,
``[Report.pdf, p. 3]``, ``page 12``, ``pages 3 to 5``, ``p. 3, 7-9`` and ``第12页``; and for a
DOCX's or HTML's sections ``§ 4`` and ``§§ 2-5``, checked against the sections of the part
(left alone where the checker knows no sections: a PDF may quote a law's ``§ 12``).
A page whose text was read from a scan can carry a mark that every citation of it then
shows: ``(p. 3, read by OCR)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping

from chat.documents.overlap import shingles

_NUMBERS = r"\d{1,5}(?:\s*(?:-|–|—|~|to)\s*\d{1,5})?(?:\s*(?:,|and|&)\s*\d{1,5}(?:\s*(?:-|–|—|~|to)\s*\d{1,5})?)*"
_REFERENCE = rf"(?:(?P<word>\b(?:pp?|pg)\.|\b[Pp]ages?\b|§§?)\s*(?P<numbers>{_NUMBERS})|第\s*(?P<cjk>{_NUMBERS})\s*页)"
# A whole bracketed citation, possibly naming its document: removed whole when nothing in it stands.
_GROUP_RE = re.compile(
    rf"\s?(?P<open>[\[(（])(?P<before>[^\[\]()（）\n]{{0,120}}?){_REFERENCE}(?P<after>[^\[\]()（）\n]{{0,40}}?)(?P<close>[\])）])"
)
_PROSE_RE = re.compile(rf"(?:(?:^|,?\s)(?i:on|in|at|see|from)\s+|\s)?{_REFERENCE}", re.MULTILINE)
_SPAN_RE = re.compile(r"(\d{1,5})(?:\s*(?:-|–|—|~|to)\s*(\d{1,5}))?")
_SENTENCE_END = re.compile(r"[.!?。！？\n]")
# Citation text may still be arriving when a stream is cut into pieces: hold back a tail this long.
HOLD_BACK_CHARS = 48
MIN_SHARED_SHINGLES = 2
MIN_SHARED_SHARE = 0.3

Spans = list[tuple[int, int]]


def parse_spans(numbers: str) -> Spans:
    pairs = [(int(first), int(last or first)) for first, last in _SPAN_RE.findall(numbers)]
    return [(min(pair), max(pair)) for pair in pairs]


def as_spans(numbers: list[int]) -> Spans:
    """Sorted page numbers as runs: [3, 4, 5, 9] -> [(3, 5), (9, 9)]."""
    spans: Spans = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], number)
        else:
            spans.append((number, number))
    return spans


def span_text(spans: Spans) -> str:
    """[(3, 5), (9, 9)] -> '3–5, 9'"""
    return ", ".join(f"{low}" if low == high else f"{low}–{high}" for low, high in spans)


def _render_spans(spans: Spans, word: str | None) -> str:
    text = span_text(spans)
    many = len(spans) > 1 or spans[0][0] != spans[0][1]
    if word is None:
        return f"第{text}页"
    if word.startswith("§"):
        return ("§§ " if many else "§ ") + text
    if word.lower().startswith("page"):
        return ("pages " if many else "page ") + text
    return ("pp. " if many else "p. ") + text


def _claim_before(text: str, end: int) -> str:
    """The sentence a citation at ``end`` closes."""
    head = text[:end].rstrip(" .。,;:")
    starts = [match.end() for match in _SENTENCE_END.finditer(head)]
    return head[starts[-1] if starts else 0 :]


def _best_page(claim: str, page_shingles: Mapping[int, set[tuple[str, ...]]]) -> int | None:
    """The one page of the part the claim shares most runs of words with, if one clearly does:
    at least MIN_SHARED_SHINGLES runs and MIN_SHARED_SHARE of the claim's, and no tie."""
    claimed = shingles(claim, 3)
    if not claimed:
        return None
    scores = sorted(((len(claimed & runs), number) for number, runs in page_shingles.items()), reverse=True)
    if not scores or scores[0][0] < max(MIN_SHARED_SHINGLES, MIN_SHARED_SHARE * len(claimed)):
        return None
    if len(scores) > 1 and scores[1][0] == scores[0][0]:
        return None
    return scores[0][1]


class _Targets:
    """The numbers one kind of reference (pages, or sections) may point at, and their texts."""

    def __init__(self, numbers: Collection[int], texts: Mapping[int, str] | None):
        self.numbers = set(numbers)
        self.texts = texts or {}
        self._shingles: dict[int, set[tuple[str, ...]]] | None = None

    def fixed(self, spans: Spans, text: str, end: int) -> Spans | None:
        """The spans that stand (clipped to numbers that exist), a corrected one, or None."""
        kept = []
        for low, high in spans:
            inside = [number for number in range(low, min(high, low + 2000) + 1) if number in self.numbers]
            if inside:
                kept.append((inside[0], inside[-1]))
        if kept:
            return kept
        if self._shingles is None:  # once per checker: a long part's pages are many
            self._shingles = {number: shingles(page, 3) for number, page in self.texts.items()}
        page = _best_page(_claim_before(text, end), self._shingles)
        return [(page, page)] if page is not None else None


class CitationChecker:
    """Checks every citation in a text against the pages (and ``§`` sections) that exist in its part.

    Without ``sections``, ``§`` references are left as written."""

    def __init__(
        self,
        pages: Collection[int],
        page_texts: Mapping[int, str] | None = None,
        sections: Collection[int] | None = None,
        section_texts: Mapping[int, str] | None = None,
        page_marks: Mapping[int, str] | None = None,
    ):
        self.pages = _Targets(pages, page_texts)
        self.page_marks = page_marks or {}
        self.sections = None if sections is None else _Targets(sections, section_texts)
        self.removed = 0
        self.corrected = 0

    def _replace(
        self, match: re.Match, text: str, whole: Callable[[str], str], marked: Callable[[str | None, str], str]
    ) -> str:
        """``whole(reference)``: the citation with another reference; ``marked(reference, mark)``:
        with a mark too (``None``: the reference as written)."""
        word = match.group("word")
        numbers = match.group("numbers") if word else match.group("cjk")
        targets = self.sections if word and word.startswith("§") else self.pages
        if targets is None:
            return match.group(0)
        spans = parse_spans(numbers)
        if spans and all(targets.numbers.issuperset(range(low, high + 1)) for low, high in spans):
            mark = self._mark(spans, targets, match, text)
            return marked(None, mark) if mark else match.group(0)
        fixed = targets.fixed(spans, text, match.start())
        if fixed is None:
            self.removed += 1
            return ""
        self.corrected += 1
        mark = self._mark(fixed, targets, match, text)
        reference = _render_spans(fixed, word)
        return marked(reference, mark) if mark else whole(reference)

    def _mark(self, spans: Spans, targets: _Targets, match: re.Match, text: str) -> str:
        """What the cited pages' marks say (``read by OCR``; ``p. 3 read by OCR`` when only some
        of them were), unless the citation says so already."""
        if targets is not self.pages or not self.page_marks:
            return ""
        cited = [n for low, high in spans for n in range(low, min(high, low + 2000) + 1) if n in targets.numbers]
        words = []
        for label in dict.fromkeys(self.page_marks[n] for n in cited if n in self.page_marks):
            if label in match.group(0) or text[match.end() :].lstrip(" ,(（").startswith(label):
                continue  # the model copied the mark from its passage
            some = [n for n in cited if self.page_marks.get(n) == label]
            words.append(label if len(some) == len(cited) else f"{_render_spans(as_spans(some), 'p.')} {label}")
        return "; ".join(words)

    def check(self, text: str) -> str:
        """The text with every citation to a page outside the part corrected or removed."""

        def group(match: re.Match) -> str:
            space = match.group(0)[: match.start("open") - match.start()]
            written = text[match.end("before") : match.start("after")]

            def whole(reference: str) -> str:
                return f"{space}{match['open']}{match['before']}{reference}{match['after']}{match['close']}"

            return self._replace(match, text, whole, lambda reference, mark: whole(f"{reference or written}, {mark}"))

        def prose(match: re.Match) -> str:
            lead = match.group(0)[: match.start("word" if match.group("word") else "cjk") - match.start()]
            written = match.group(0)[len(lead) :]
            # Inside brackets it was a group's (marked there), or a mark's own words.
            bracketed = _inside_brackets(text, match.start())
            return self._replace(
                match,
                text,
                lambda reference: lead + reference,
                lambda reference, mark: lead + (reference or written) + ("" if bracketed else f" ({mark})"),
            )

        text = _GROUP_RE.sub(group, text)
        return _PROSE_RE.sub(prose, text)


def _inside_brackets(text: str, position: int) -> bool:
    """Whether ``position`` is after an opening bracket on its line that is not closed before it."""
    line = text[text.rfind("\n", 0, position) + 1 : position]
    opened = max(line.rfind(char) for char in "[(（")
    return opened >= 0 and opened > max(line.rfind(char) for char in "])）")


def check_citations(
    text: str, pages: Collection[int], page_texts: Mapping[int, str] | None = None, sectioned: bool = False
) -> str:
    """``sectioned``: the part is a DOCX's or HTML's sections, cited as ``§ N`` (or, by a confused
    model, as pages): both are checked against them."""
    sections = pages if sectioned else None
    return CitationChecker(pages, page_texts, sections, page_texts if sectioned else None).check(text)


def pages_of_marked_text(text: str) -> dict[int, str]:
    """The pages of a chunk's input, split at its ``[p. N]`` markers."""
    pages: dict[int, str] = {}
    parts = re.split(r"^\[p\. (\d+)\]$", text, flags=re.MULTILINE)
    for index in range(1, len(parts) - 1, 2):
        number = int(parts[index])
        pages[number] = pages.get(number, "") + parts[index + 1]
    return pages


# What a prose citation looks like while it is still arriving: "see", "on pa", "pages 3 to".
_PARTIAL_PROSE = re.compile(
    r"(?i:(?:o|on|i|in|a|at|s|se|see|f|fr|fro|from)(?:\s+|$))?(?i:p|pp|pg|pa|pag|pages?)?\.?"
    r"[\s\d,\-–—~&]*(?:(?:t|to|a|an|and)[\s\d,\-–—~&]*)*"
)
_PARTIAL_CJK = re.compile(r"第[\s\d,\-–—~]*")
_PARTIAL_SECTION = re.compile(r"§§?[\s\d,\-–—~&]*(?:(?:t|to|a|an|and)[\s\d,\-–—~&]*)*")


def _could_grow(tail: str) -> bool:
    """Whether ``tail`` may still be the start of a citation still arriving."""
    if tail[0] in "[(（":
        return len(tail) < HOLD_BACK_CHARS * 4 and not any(char in tail for char in "])）\n")
    if tail[0] == "第":
        return bool(_PARTIAL_CJK.fullmatch(tail))
    if tail[0] == "§":
        return len(tail) < HOLD_BACK_CHARS and bool(_PARTIAL_SECTION.fullmatch(tail))
    return len(tail) < HOLD_BACK_CHARS and bool(_PARTIAL_PROSE.fullmatch(tail))


class CitationStream:
    """Checks the citations of an answer while it streams: text that may still become a
    citation is held back until it is whole, so an invented page never reaches the page."""

    def __init__(self, checker: CitationChecker):
        self.checker = checker
        self.shown = ""
        self.pending = ""

    def feed(self, text: str) -> str:
        """What may be shown now of the text so far."""
        self.pending += text
        return self._release(self._safe_length())

    def finish(self) -> str:
        return self._release(len(self.pending))

    def _safe_length(self) -> int:
        """Up to the first place in the tail where a citation may have begun and not ended yet."""
        before = self.shown[-1:]
        for index in range(max(0, len(self.pending) - HOLD_BACK_CHARS * 4), len(self.pending)):
            char = self.pending[index]
            previous = self.pending[index - 1] if index else before
            starts_word = char.isalpha() and not (previous and previous.isalnum())
            if (char in "[(（第§" or starts_word) and _could_grow(self.pending[index:]):
                # The space before it too: a citation removed takes its space along.
                return len(self.pending[:index].rstrip())
        return len(self.pending)

    def _release(self, cut: int) -> str:
        if cut <= 0:
            return ""
        released = self.checker.check(self.pending[:cut])
        self.pending = self.pending[cut:]
        self.shown += released
        return released
