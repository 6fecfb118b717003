"""The index's storage: vectors packed as float32 of unit length and ranked by cosine similarity
(numpy over the candidates' rows, after they are filtered to the collections asked), and the passages'
words in SQLite's FTS5 table ranked by bm25.

Why not ``sqlite-vec``: its ``vec0`` table is loaded as an SQLite extension, and the Python the product
runs on here (pyenv's 3.11) is built without ``enable_load_extension``; a plain table of blobs works on
every build and on PostgreSQL alike (docs/knowledge.md has the figures)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from django.db import connection

from chat.knowledge.passages import fts_terms

FTS_TABLE = "chat_knowledge_fts"
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
    """The passages' words into the FTS5 table (a trigger takes them out with the passage)."""
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {FTS_TABLE} (rowid, terms) VALUES (%s, %s)", [(pk, fts_terms(text)) for pk, text in rows]
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
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {FTS_TABLE}.rowid, bm25({FTS_TABLE}) FROM {FTS_TABLE} "
            f"JOIN chat_knowledgepassage p ON p.id = {FTS_TABLE}.rowid "
            f"WHERE {FTS_TABLE} MATCH %s AND p.collection_id IN ({_in_list(collection_ids)}) "
            f"ORDER BY bm25({FTS_TABLE}) LIMIT %s",
            [query, limit],
        )
        return [(pk, -score) for pk, score in cursor.fetchall()]


def nearest(collection_ids: Sequence[int], query: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """(passage id, cosine similarity) of the collections' passages closest to ``query`` (a unit vector)."""
    if not collection_ids:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT v.passage_id, v.vector FROM chat_knowledgevector v "
            "JOIN chat_knowledgepassage p ON p.id = v.passage_id "
            f"WHERE p.collection_id IN ({_in_list(collection_ids)})"
        )
        rows = cursor.fetchall()
    if not rows:
        return []
    width = query.shape[0] * 4
    rows = [(pk, blob) for pk, blob in rows if len(blob) == width]  # a vector of another model is skipped
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(bytes(blob) for _pk, blob in rows), dtype=np.float32).reshape(len(rows), -1)
    scores = matrix @ query
    top = np.argsort(-scores)[:limit] if len(rows) > limit else np.argsort(-scores)
    return [(rows[i][0], float(scores[i])) for i in top]
