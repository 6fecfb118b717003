"""Questions about attached documents: their summary plus the passages that match, sized to fit.

Passages are ranked with BM25 (rank-bm25) over words, and over character pairs for
Chinese, Japanese and Korean, which have no spaces between words. Every passage
carries its page (a DOCX's or HTML's section, labelled ``§ N``), so answers can cite it,
and says when that page's text was read from a scan (by OCR, or by the model), as the
answer's citations of such a page then say too.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.utils.translation import gettext as _
from rank_bm25 import BM25Okapi

from chat.documents.citations import CitationChecker
from chat.documents.selectors import text_pages
from chat.models import Document, DocumentPage
from monitor.public import PromptCounter

PASSAGE_CHARS = 700
MAX_EXACT_COUNTS = 4
_WORD = re.compile(r"\w+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")

INSTRUCTIONS = (
    "Answer the user's question using the attached document below. "
    "Cite the pages you use as (p. N). If the document does not say, say so."
)
SECTION_INSTRUCTIONS = (
    "Answer the user's question using the attached document below. "
    "Cite the sections you use as (§ N). If the document does not say, say so."
)
MIXED_INSTRUCTIONS = (
    "Answer the user's question using the attached documents below. "
    "Cite the pages you use as (p. N), and the sections of documents divided into sections as (§ N). "
    "If the documents do not say, say so."
)


def instructions_for(documents: list[Document]) -> str:
    sectioned = {document.kind in Document.SECTIONED for document in documents}
    if sectioned == {True}:
        return SECTION_INSTRUCTIONS
    return MIXED_INSTRUCTIONS if sectioned == {True, False} else INSTRUCTIONS


@dataclass(frozen=True)
class Passage:
    document: str
    page: int
    text: str
    sectioned: bool = False
    read_by: str = ""  # "OCR" or "the model" for a scanned page's text, which may have reading errors

    def render(self) -> str:
        read = f", read by {self.read_by}" if self.read_by else ""
        return f"[{self.document}, {'§' if self.sectioned else 'p.'} {self.page}{read}]\n{self.text}"


def terms(text: str) -> list[str]:
    result: list[str] = []
    for word in _WORD.findall(text.lower()):
        if _CJK.search(word):
            result.extend(word)
            result.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            result.append(word)
    return result


def split_passages(document: str, page: int, text: str, sectioned: bool = False, read_by: str = "") -> list[Passage]:
    """A page's (or section's) paragraphs, merged or cut to about PASSAGE_CHARS each."""
    pieces: list[str] = []
    current = ""
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        while len(paragraph) > PASSAGE_CHARS:
            pieces.append(paragraph[:PASSAGE_CHARS])
            paragraph = paragraph[PASSAGE_CHARS:]
        if current and len(current) + len(paragraph) > PASSAGE_CHARS:
            pieces.append(current)
            current = ""
        current = f"{current}\n{paragraph}".strip()
    if current:
        pieces.append(current)
    return [Passage(document, page, piece, sectioned, read_by) for piece in pieces]


def rank_passages(question: str, passages: list[Passage]) -> list[Passage]:
    """Best match first; passages that share no term with the question are left out."""
    query = terms(question)
    if not query or not passages:
        return []
    scores = BM25Okapi([terms(p.text) or ["\0"] for p in passages]).get_scores(query)
    ranked = sorted(range(len(passages)), key=lambda i: (-scores[i], i))
    query_set = set(query)
    return [passages[i] for i in ranked if query_set.intersection(terms(passages[i].text))]


def _attached(conversation_id) -> list[tuple[Document, list[tuple[int, str]]]]:
    documents = Document.objects.filter(conversation_id=conversation_id).order_by("created_at")
    return [(document, pages) for document in documents if (pages := text_pages(document.id))]


async def _fits(client: PromptCounter, text: str, budget: int, exact_left: list[int]) -> bool:
    # A token is never shorter than a byte: under the budget in bytes surely fits.
    if len(text.encode()) <= budget:
        return True
    if exact_left[0] <= 0:
        return False
    exact_left[0] -= 1
    return await client.count_tokens(text) <= budget


async def document_system_message(client: PromptCounter, conversation_id, question: str, budget: int) -> str | None:
    """The system message for a question in a conversation with documents (at most ``budget`` tokens),
    or None without any."""
    attached = await sync_to_async(_attached)(conversation_id)
    if not attached:
        return None
    exact_left = [MAX_EXACT_COUNTS]
    instructions = instructions_for([document for document, _pages in attached])
    head = [instructions]
    for document, pages in attached:
        unit = "sections" if document.kind in Document.SECTIONED else "pages"
        head.append(f"\n## {document.name} ({len(pages)} {unit} with text)")
        if document.summary:
            head.append("Summary:\n" + document.summary.strip())
    text = "\n".join(head)
    if not await _fits(client, text, budget, exact_left):
        # The summaries alone are too long: keep the instructions and the passages.
        text = instructions
    # Ranking a long document is CPU work: keep it off the event loop that streams tokens.
    ranked = await asyncio.to_thread(_ranked, question, attached)
    chosen: list[Passage] = []
    for passage in ranked:
        candidate = chosen + [passage]
        if not await _fits(client, _render(text, candidate), budget, exact_left):
            break
        chosen = candidate
    return _render(text, chosen)


def _read_by(document: Document, number: int) -> str:
    """Who read a scanned page's text, as the model is told ("OCR", "the model"); "" for a text layer."""
    if number in document.ocr_pages:
        return "OCR"
    return "the model" if number in document.model_read_pages else ""


def _ranked(question: str, attached: list[tuple[Document, list[tuple[int, str]]]]) -> list[Passage]:
    passages = [
        passage
        for document, pages in attached
        for number, page in pages
        for passage in split_passages(
            document.name, number, page, document.kind in Document.SECTIONED, _read_by(document, number)
        )
    ]
    return rank_passages(question, passages)


def _document_pages(conversation_id) -> tuple[dict[int, str], dict[int, str], dict[int, str]]:
    """Every page with text of the conversation's paged documents, every section of its DOCX
    and HTML documents (those of the same number joined), and who read each scanned page."""
    pages: dict[int, str] = {}
    sections: dict[int, str] = {}
    readers: dict[int, set[str]] = {}
    documents = {document.id: document for document in Document.objects.filter(conversation_id=conversation_id)}
    for number, text, document_id in DocumentPage.objects.filter(document__in=list(documents)).values_list(
        "number", "text", "document_id"
    ):
        document = documents[document_id]
        sectioned = document.kind in Document.SECTIONED
        into = sections if sectioned else pages
        into[number] = f"{into.get(number, '')}\n{text}"
        if not sectioned and text:
            readers.setdefault(number, set()).add(_read_by(document, number))
    # A page number is marked only where every document that has it agrees on who read it.
    read_by = {number: next(iter(who)) for number, who in readers.items() if len(who) == 1 and "" not in who}
    return pages, sections, read_by


async def answer_citation_checker(conversation_id) -> CitationChecker | None:
    """What an answer's citations are checked against: the pages its documents have, and their
    sections (``§ N``). With only sectioned documents, a page citation is checked against the
    sections too: the numbers that exist are the same. A citation of a page read from a scan
    is marked so (``(p. 3, read by OCR)``)."""
    pages, sections, read_by = await sync_to_async(_document_pages)(conversation_id)
    if not pages and not sections:
        return None
    if not pages:
        return CitationChecker(sections, sections, sections, sections)
    labels = {"OCR": _("read by OCR"), "the model": _("read by the model")}
    marks = {number: labels[who] for number, who in read_by.items()}
    return CitationChecker(pages, pages, sections if sections else None, sections, page_marks=marks)


def _render(head: str, passages: list[Passage]) -> str:
    if not passages:
        return head
    ordered = sorted(passages, key=lambda p: (p.document, p.page))
    return head + "\n\n## Passages\n\n" + "\n\n".join(p.render() for p in ordered)
