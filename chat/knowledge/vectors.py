"""The index's storage: vectors packed as float32 of unit length and ranked by cosine similarity
(numpy over the candidates' rows, after they are filtered to the collections asked), and the passages'
words in SQLite's FTS5 table ranked by bm25, or on PostgreSQL in a ``tsvector`` table (GIN index) ranked
by ``ts_rank_cd`` (migration 0014).

Each collection's vectors are kept as one matrix in the process that searches them while they do not
change: ranked by numpy, more than ten times faster than ``sqlite-vec`` over the same rows, and the same
on PostgreSQL (docs/knowledge.md, "Vectors", has the figures)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
from django.db import connection

from chat.knowledge.passages import fts_terms

FTS_TABLE = "chat_knowledge_fts"
# Per collection: (its state, passage ids, vectors): a 50,000-passage matrix costs 128 MB of float32 (640
# wide) and reading it from the database about half a second, once.
_kept: dict[int, tuple[tuple[int, int, int], np.ndarray, np.ndarray]] = {}
_lock = threading.Lock()
KEPT_COLLECTIONS = 8
MAX_QUERY_TERMS = 64


def pack(vector: Sequence[float]) -> bytes:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return (array / norm if norm else array).tobytes()


def unit(vector: Sequence[float]) -> np.ndarray:
    return np.frombuffer(pack(vector), dtype=np.float32)


def _in_list(ids: Sequence[int]) -> str:
    return ",".join(str(int(value)) for value in ids)


def add_terms(rows: Sequence[tuple[int, str]]) -> None:
    """The passages' words into the words table (they go with the passage: SQLite's trigger, PostgreSQL's
    foreign key)."""
    value = "to_tsvector('simple', %s)" if connection.vendor == "postgresql" else "%s"
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {FTS_TABLE} (rowid, terms) VALUES (%s, {value})",
            [(pk, fts_terms(text)) for pk, text in rows],
        )


def fts_query(question: str) -> str:
    """Any of the question's words (each quoted: nothing in it is FTS5 syntax)."""
    words = list(dict.fromkeys(fts_terms(question).split()))[:MAX_QUERY_TERMS]
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in words)


def lexical(collection_ids: Sequence[int], question: str, limit: int) -> list[tuple[int, float]]:
    """(passage id, bm25 score: higher is better) of the collections' passages matching any word."""
    query = fts_query(question)
    if not query or not collection_ids:
        return []
    if connection.vendor == "postgresql":
        return _lexical_postgresql(collection_ids, question, limit)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {FTS_TABLE}.rowid, bm25({FTS_TABLE}) FROM {FTS_TABLE} "
            f"JOIN chat_knowledgepassage p ON p.id = {FTS_TABLE}.rowid "
            f"WHERE {FTS_TABLE} MATCH %s AND p.collection_id IN ({_in_list(collection_ids)}) "
            f"ORDER BY bm25({FTS_TABLE}) LIMIT %s",
            [query, limit],
        )
        return [(pk, -score) for pk, score in cursor.fetchall()]


def _lexical_postgresql(collection_ids: Sequence[int], question: str, limit: int) -> list[tuple[int, float]]:
    """The same on PostgreSQL: any of the question's words (each a quoted lexeme, so nothing in it is
    tsquery syntax), ranked by ``ts_rank_cd``."""
    words = list(dict.fromkeys(fts_terms(question).split()))[:MAX_QUERY_TERMS]
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH q AS (SELECT to_tsquery('simple', string_agg(quote_literal(lexeme), ' | ')) AS query "
            "FROM unnest(to_tsvector('simple', %s))) "
            f"SELECT f.rowid, ts_rank_cd(f.terms, q.query) FROM {FTS_TABLE} f "
            "JOIN chat_knowledgepassage p ON p.id = f.rowid CROSS JOIN q "
            f"WHERE f.terms @@ q.query AND p.collection_id IN ({_in_list(collection_ids)}) "
            "ORDER BY 2 DESC LIMIT %s",
            [" ".join(words), limit],
        )
        return [(pk, float(score)) for pk, score in cursor.fetchall()]


def _collection_state(collection_id: int) -> tuple[int, int]:
    """(vectors, highest passage id): changes whenever a vector is added or deleted."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), coalesce(max(v.passage_id), 0) FROM chat_knowledgevector v "
            "JOIN chat_knowledgepassage p ON p.id = v.passage_id WHERE p.collection_id = %s",
            [collection_id],
        )
        count, highest = cursor.fetchone()
    return int(count), int(highest)


def collection_matrix(collection_id: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(passage ids, their vectors as rows) of one collection, kept in this process while they do not
    change. A kept matrix can only lag behind a change, never show a deleted passage's text: results are
    read back from the passages' table, where a deleted passage is gone."""
    state = (*_collection_state(collection_id), width)
    with _lock:
        kept = _kept.get(collection_id)
    if kept is not None and kept[0] == state:
        return kept[1], kept[2]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT v.passage_id, v.vector FROM chat_knowledgevector v "
            "JOIN chat_knowledgepassage p ON p.id = v.passage_id WHERE p.collection_id = %s",
            [collection_id],
        )
        rows = [(pk, blob) for pk, blob in cursor.fetchall() if len(blob) == width * 4]  # another model's: skipped
    ids = np.fromiter((pk for pk, _blob in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(bytes(blob) for _pk, blob in rows), dtype=np.float32).reshape(len(rows), width)
    with _lock:
        _kept.pop(collection_id, None)
        while len(_kept) >= KEPT_COLLECTIONS:
            _kept.pop(next(iter(_kept)))  # the one kept longest
        _kept[collection_id] = (state, ids, matrix)
    return ids, matrix


def nearest(collection_ids: Sequence[int], query: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """(passage id, cosine similarity) of the collections' passages closest to ``query`` (a unit vector)."""
    found: list[tuple[int, float]] = []
    for collection_id in collection_ids:
        ids, matrix = collection_matrix(int(collection_id), query.shape[0])
        if not len(ids):
            continue
        scores = matrix @ query
        top = np.argpartition(-scores, limit)[:limit] if len(ids) > limit else np.arange(len(ids))
        found += [(int(ids[i]), float(scores[i])) for i in top]
    return sorted(found, key=lambda pair: -pair[1])[:limit]
