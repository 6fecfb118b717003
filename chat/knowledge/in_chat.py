"""Knowledge collections in a chat turn: which collections a question asks (the conversation's picker,
and ``#mention`` in the question for that turn), their passages retrieved and put into the prompt the way
a conversation's documents are, the answer's citations checked against those passages, and the
passages recorded as the answer's sources (the pages its citations open).

**Relevant** (docs/knowledge.md has the measured figures): with a reranker, a passage it scored at least
``KNOWLEDGE_MIN_RERANK_SCORE``; without one, a passage that shares a *content term* with the question
(a word of 3 letters or more that is not a function word, or a pair of CJK characters), or whose
vector's cosine similarity with the question's is at least ``KNOWLEDGE_ANSWER_MIN_SIMILARITY``. Nothing
relevant: the turn says so plainly (``NothingFound``) and the model is not called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils.translation import gettext as _

from chat.documents.citations import CitationChecker, CitationStream
from chat.documents.retrieval import Passage, terms
from chat.errors import ChatError
from chat.knowledge.models import AnswerPassage, Collection
from chat.knowledge.search import Found, Retrieved, retrieve
from chat.knowledge.selectors import picked_collection_ids, readable_collections
from chat.models import Conversation, Document
from monitor.public import PromptCounter

MENTION = re.compile(r"(?<![\w#&])#([A-Za-z0-9][A-Za-z0-9_-]{0,49})")
_CJK_PAIR = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]{2}")
# English function words of 3 letters or more: they say nothing of what a question is about.
FUNCTION_WORDS = frozenset(
    "the and for are but not you all any can had her was one our out has him his how its may new now "
    "own say she too use who why yes yet did does doing done get got let off per via what when where which "
    "while whom whose with from into onto upon about above after again against also been before being "
    "below between both could each few further have having here just more most much must other over "
    "same should some such than that their them then there these they this those through under until "
    "very were will would your yours tell give show know please there's what's".split()
)
INSTRUCTIONS = (
    "Answer the user's question using only the passages below, taken from the knowledge collections "
    "the user chose. Cite the page of each passage you use as [document, p. N] (sections as [document, § N]). "
    "If the passages do not answer the question, say so."
)


class NothingFound(ChatError):
    """The collections asked hold nothing relevant to the question: said as the answer, no model call."""


@dataclass(frozen=True)
class Asked:
    user: object
    collections: list[Collection]
    asked_any: bool  # a collection was picked or mentioned, readable or not


def mentions(text: str) -> list[str]:
    """The ``#slug`` mentions in a question, lower-cased, in order."""
    return list(dict.fromkeys(match.group(1).lower() for match in MENTION.finditer(text)))


def without_mentions(text: str, slugs: list[str]) -> str:
    """The question with the mentions of the collections it asks taken out (they are not its words)."""
    asked = set(slugs)
    return MENTION.sub(lambda m: " " if m.group(1).lower() in asked else m.group(0), text).strip()


def asked_collections(conversation_id, owner_id: int, question: str) -> Asked:
    """The collections a turn asks: the conversation's picked ones and those mentioned, narrowed to
    those the person may read now. A mention of a collection they cannot read counts as no mention
    (it tells nothing about it). A turn that asks none costs one read."""
    slugs = mentions(question)
    picked = picked_collection_ids(conversation_id)
    if not picked and not slugs:
        return Asked(None, [], False)
    user = get_user_model().objects.get(pk=owner_id)
    readable = readable_collections(user)
    mentioned = list(readable.filter(slug__in=slugs)) if slugs else []
    chosen = (list(readable.filter(pk__in=picked)) if picked else []) + mentioned
    unique = list({collection.pk: collection for collection in chosen}.values())
    return Asked(user, unique, bool(picked or mentioned))


def content_terms(text: str) -> set[str]:
    """The terms that say what a text is about: words of 3 letters or more that are not function words,
    and CJK character pairs (single CJK characters are left out: 的, 是 would match everything)."""
    return {
        term
        for term in terms(text)
        if (len(term) >= 3 and term not in FUNCTION_WORDS) or (len(term) == 2 and _CJK_PAIR.fullmatch(term))
    }


def relevant(retrieved: Retrieved, question: str) -> list[Found]:
    """The passages that pass the turn's bar (the module's docstring)."""
    if retrieved.reranked:
        return retrieved.found
    asked = content_terms(question)
    bar = settings.KNOWLEDGE_ANSWER_MIN_SIMILARITY
    return [
        item
        for item in retrieved.found
        if asked & content_terms(item.text) or (item.similarity is not None and item.similarity >= bar)
    ]


def nothing_found_message(collections: list[Collection]) -> str:
    if not collections:
        return _("None of the collections asked can be read by you now, so there is nothing to answer from.")
    names = ", ".join(f"#{collection.slug}" for collection in collections)
    return _(
        "Nothing in %(collections)s is relevant enough to this question, so no answer was made up. "
        "Try other words, or ask another collection."
    ) % {"collections": names}


def _record(message_id: int, passages: list[Found]) -> None:
    AnswerPassage.objects.bulk_create(
        [AnswerPassage(message_id=message_id, passage_id=item.passage_id) for item in passages],
        ignore_conflicts=True,
    )


def _passage(item: Found) -> Passage:
    return Passage(f"{item.document}", item.page, item.text, item.kind in Document.SECTIONED)


def _render(passages: list[Found]) -> str:
    ordered = sorted(passages, key=lambda item: (item.document, item.page))
    return INSTRUCTIONS + "\n\n## Passages\n\n" + "\n\n".join(_passage(item).render() for item in ordered)


async def _fitted(client: PromptCounter, passages: list[Found], budget: int) -> list[Found]:
    """The best passages whose prompt fits ``budget`` tokens (bytes bound tokens: counted only if over)."""
    chosen = list(passages)
    while len(chosen) > 1:
        text = _render(chosen)
        if len(text.encode()) <= budget or await client.count_tokens(text) <= budget:
            break
        chosen.pop()
    return chosen


def checker_for(passages: list[Found], documents: CitationChecker | None = None) -> CitationChecker:
    """Citations checked against the pages (and sections) of the passages given, with those of the
    conversation's own documents when it has some too."""
    pages: dict[int, str] = dict(documents.pages.texts) if documents else {}
    sections: dict[int, str] = dict(documents.sections.texts) if documents and documents.sections else {}
    page_numbers = set(documents.pages.numbers) if documents else set()
    for item in passages:
        into = sections if item.kind in Document.SECTIONED else pages
        into[item.page] = f"{into.get(item.page, '')}\n{item.text}"
        if into is pages:
            page_numbers.add(item.page)
    if not page_numbers:  # sections only: a page citation is checked against them too
        return CitationChecker(sections, sections, sections, sections)
    return CitationChecker(page_numbers, pages, sections or None, sections or None)


async def with_knowledge(
    client: PromptCounter,
    conversation: Conversation,
    message_id: int,
    messages: list[dict],
    budget: int,
    citations: CitationStream | None,
) -> tuple[list[dict], CitationStream | None]:
    """The turn's messages with the collections' passages (in the system message, at most ``budget``
    tokens with what it held), and the citation
    check to apply; unchanged when the turn asks no collection. Raises ``NothingFound``."""
    content = messages[-1]["content"]
    question = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
    asked = await sync_to_async(asked_collections)(conversation.id, conversation.owner_id, question)
    if not asked.asked_any:
        return messages, citations
    slugs = [collection.slug for collection in asked.collections]
    retrieved = await retrieve(
        asked.user,
        [collection.pk for collection in asked.collections],
        without_mentions(question, slugs),
        settings.KNOWLEDGE_ANSWER_PASSAGES,
    )
    found = relevant(retrieved, without_mentions(question, slugs))
    if not found:
        raise NothingFound(nothing_found_message(asked.collections))
    has_system = messages[0]["role"] == "system"
    head = messages[0]["content"] + "\n\n" if has_system else ""
    found = await _fitted(client, found, budget - len(head.encode()))
    await sync_to_async(_record)(message_id, found)
    system = {"role": "system", "content": head + _render(found)}
    checker = checker_for(found, citations.checker if citations else None)
    return [system, *messages[1:]] if has_system else [system, *messages], CitationStream(checker)
