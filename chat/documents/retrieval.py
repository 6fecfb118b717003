"""Questions about attached documents: their summary plus the passages that match, sized to fit.

Passages are ranked with BM25 (rank-bm25) over words, and over character pairs for
Chinese, Japanese and Korean, which have no spaces between words. Every passage
carries its page, so answers can cite it.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from rank_bm25 import BM25Okapi

from chat.documents.citations import CitationChecker
from chat.models import Document, DocumentPage
from monitor.public import LlamaClient

PASSAGE_CHARS = 700
MAX_EXACT_COUNTS = 4
_WORD = re.compile(r"\w+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")

INSTRUCTIONS = (
    "Answer the user's question using the attached document below. "
    "Cite the pages you use as (p. N). If the document does not say, say so."
)


@dataclass(frozen=True)
class Passage:
    document: str
    page: int
    text: str

    def render(self) -> str:
        return f"[{self.document}, p. {self.page}]\n{self.text}"


def terms(text: str) -> list[str]:
    result: list[str] = []
    for word in _WORD.findall(text.lower()):
        if _CJK.search(word):
            result.extend(word)
            result.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            result.append(word)
    return result


def split_passages(document: str, page: int, text: str) -> list[Passage]:
    """A page's paragraphs, merged or cut to about PASSAGE_CHARS each."""
    passages: list[Passage] = []
    current = ""
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        while len(paragraph) > PASSAGE_CHARS:
            passages.append(Passage(document, page, paragraph[:PASSAGE_CHARS]))
            paragraph = paragraph[PASSAGE_CHARS:]
        if current and len(current) + len(paragraph) > PASSAGE_CHARS:
            passages.append(Passage(document, page, current))
            current = ""
        current = f"{current}\n{paragraph}".strip()
    if current:
        passages.append(Passage(document, page, current))
    return passages


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
    result = []
    for document in Document.objects.filter(conversation_id=conversation_id).order_by("created_at"):
        pages = list(DocumentPage.objects.filter(document=document).exclude(text="").values_list("number", "text"))
        if pages:
            result.append((document, pages))
    return result


async def _fits(client: LlamaClient, text: str, budget: int, exact_left: list[int]) -> bool:
    # A token is never shorter than a byte: under the budget in bytes surely fits.
    if len(text.encode()) <= budget:
        return True
    if exact_left[0] <= 0:
        return False
    exact_left[0] -= 1
    return await client.count_tokens(text) <= budget


async def document_system_message(client: LlamaClient, conversation_id, question: str, budget: int) -> str | None:
    """The system message for a question in a conversation with documents (at most ``budget`` tokens),
    or None without any."""
    attached = await sync_to_async(_attached)(conversation_id)
    if not attached:
        return None
    exact_left = [MAX_EXACT_COUNTS]
    head = [INSTRUCTIONS]
    for document, pages in attached:
        head.append(f"\n## {document.name} ({len(pages)} pages with text)")
        if document.summary:
            head.append("Summary:\n" + document.summary.strip())
    text = "\n".join(head)
    if not await _fits(client, text, budget, exact_left):
        # The summaries alone are too long: keep the instructions and the passages.
        text = INSTRUCTIONS
    # Ranking a long document is CPU work: keep it off the event loop that streams tokens.
    ranked = await asyncio.to_thread(_ranked, question, attached)
    chosen: list[Passage] = []
    for passage in ranked:
        candidate = chosen + [passage]
        if not await _fits(client, _render(text, candidate), budget, exact_left):
            break
        chosen = candidate
    return _render(text, chosen)


def _ranked(question: str, attached: list[tuple[Document, list[tuple[int, str]]]]) -> list[Passage]:
    passages = [
        passage
        for document, pages in attached
        for number, page in pages
        for passage in split_passages(document.name, number, page)
    ]
    return rank_passages(question, passages)


def _document_pages(conversation_id) -> dict[int, str]:
    """Every page with text of the conversation's documents (pages of the same number joined)."""
    pages: dict[int, str] = {}
    for number, text in DocumentPage.objects.filter(document__conversation_id=conversation_id).values_list(
        "number", "text"
    ):
        pages[number] = f"{pages.get(number, '')}\n{text}"
    return pages


async def answer_citation_checker(conversation_id) -> CitationChecker | None:
    """What an answer's page citations are checked against: the pages its documents have."""
    pages = await sync_to_async(_document_pages)(conversation_id)
    return CitationChecker(pages, pages) if pages else None


def _render(head: str, passages: list[Passage]) -> str:
    if not passages:
        return head
    ordered = sorted(passages, key=lambda p: (p.document, p.page))
    return head + "\n\n## Passages\n\n" + "\n\n".join(p.render() for p in ordered)
