"""Search a person's conversations: titles, and the text of every message through the database's own
full-text index (SQLite FTS5 with trigrams, or PostgreSQL's text search; see migration 0006)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connection
from django.db.models import Q
from django.db.models.expressions import RawSQL

from chat.models import Conversation, Message

QUERY_MAX_CHARS = 200
RESULTS_MAX = 50
SNIPPET_CHARS = 160
# FTS5's trigram tokenizer matches only terms of three characters or more; shorter ones are scanned.
TRIGRAM = 3
_CJK = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff]")


@dataclass
class SearchHit:
    conversation_id: str
    title: str
    snippet: str  # plain text: the page escapes it
    updated_at: object


def clean_query(query: str) -> str:
    return " ".join((query or "").split())[:QUERY_MAX_CHARS]


def _sqlite_message_ids(terms: list[str]) -> Q:
    """Messages holding every term: long terms through the FTS5 index, short ones by a scan."""
    long_terms = [term for term in terms if len(term) >= TRIGRAM]
    condition = Q()
    if long_terms:
        # Each term a quoted phrase: the person's text is never read as FTS5 syntax.
        match = " AND ".join('"' + term.replace('"', '""') + '"' for term in long_terms)
        # A subquery, not a list of ids: the index matches every person's messages, and a common word's
        # rowids, each a bound variable, would pass SQLite's limit on them.
        condition &= Q(id__in=RawSQL("SELECT rowid FROM chat_message_fts WHERE chat_message_fts MATCH %s", [match]))
    for term in terms:
        if len(term) < TRIGRAM:
            condition &= Q(content__icontains=term)
    return condition


def _postgres_message_ids(terms: list[str]) -> Q:
    """PostgreSQL's parser splits words on spaces, which Chinese text lacks: CJK terms are scanned."""
    words = [term for term in terms if not _CJK.search(term)]
    condition = Q()
    if words:
        # The very expression of the GIN index in migration 0006, so the index answers.
        condition &= Q(
            id__in=RawSQL(
                "SELECT id FROM chat_message WHERE to_tsvector('simple', content) @@ plainto_tsquery('simple', %s)",
                [" ".join(words)],
            )
        )
    for term in terms:
        if _CJK.search(term):
            condition &= Q(content__icontains=term)
    return condition


def _snippet(text: str, terms: list[str]) -> str:
    flat = " ".join(text.split())
    lowered = flat.lower()
    positions = [lowered.find(term.lower()) for term in terms if lowered.find(term.lower()) >= 0]
    start = max(0, min(positions) - SNIPPET_CHARS // 3) if positions else 0
    piece = flat[start : start + SNIPPET_CHARS]
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(flat) else "")


def _hit(conversation: Conversation) -> SearchHit:
    return SearchHit(str(conversation.id), conversation.display_title, "", conversation.updated_at)


def search_conversations(user, query: str) -> list[SearchHit]:
    """The person's own conversations whose title or one message holds every word of the query,
    newest first, each with the text around the first match."""
    terms = clean_query(query).split()
    if not terms:
        return []
    by_title = Conversation.objects.filter(*[Q(title__icontains=term) for term in terms], owner=user)
    message_match = _postgres_message_ids(terms) if connection.vendor == "postgresql" else _sqlite_message_ids(terms)
    matching = (
        Message.objects.filter(message_match, conversation__owner=user)
        .select_related("conversation")
        .order_by("-conversation__updated_at", "created_at")
    )
    hits = {conversation.id: _hit(conversation) for conversation in by_title.order_by("-updated_at")[:RESULTS_MAX]}
    for message in matching[: RESULTS_MAX * 4]:
        hit = hits.get(message.conversation_id)
        if hit is None and len(hits) < RESULTS_MAX:
            hit = hits[message.conversation_id] = _hit(message.conversation)
        if hit is not None and not hit.snippet:
            hit.snippet = _snippet(message.content, terms)
    return sorted(hits.values(), key=lambda hit: hit.updated_at, reverse=True)
