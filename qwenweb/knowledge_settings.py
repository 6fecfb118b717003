"""Settings of knowledge bases: collections, their passages, vectors and retrieval (part of ``settings``)."""

from __future__ import annotations

import os

from qwenweb.env import env_int

# Limits of one collection, named to the person when hit.
KNOWLEDGE_MAX_DOCUMENTS = env_int("QWENWEB_KNOWLEDGE_MAX_DOCUMENTS", 1000)
KNOWLEDGE_MAX_BYTES = env_int("QWENWEB_KNOWLEDGE_MAX_BYTES", 1024 * 1024 * 1024)
# Passages: about this many tokens (estimated from characters, docs/knowledge.md), overlapping by this many.
KNOWLEDGE_PASSAGE_TOKENS = env_int("QWENWEB_KNOWLEDGE_PASSAGE_TOKENS", 300)
KNOWLEDGE_PASSAGE_OVERLAP = env_int("QWENWEB_KNOWLEDGE_PASSAGE_OVERLAP", 50)
# The embeddings profile that makes the vectors ("" : the first embeddings profile); passages sent at once.
KNOWLEDGE_EMBED_PROFILE = os.environ.get("QWENWEB_KNOWLEDGE_EMBED_PROFILE", "embed-2k")
KNOWLEDGE_EMBED_BATCH = env_int("QWENWEB_KNOWLEDGE_EMBED_BATCH", 16)
# The reranking profile ("" : the first one there is; none: no reranking).
KNOWLEDGE_RERANK_PROFILE = os.environ.get("QWENWEB_KNOWLEDGE_RERANK_PROFILE", "")
# Candidates each search (words, vectors) gives the fusion; a vector-only passage below this cosine
# similarity, or a reranked one below the reranker's score, counts as not relevant.
KNOWLEDGE_CANDIDATES = env_int("QWENWEB_KNOWLEDGE_CANDIDATES", 50)
KNOWLEDGE_MIN_SIMILARITY = float(os.environ.get("QWENWEB_KNOWLEDGE_MIN_SIMILARITY", "0.5"))
KNOWLEDGE_MIN_RERANK_SCORE = float(os.environ.get("QWENWEB_KNOWLEDGE_MIN_RERANK_SCORE", "0.1"))
# A chat turn asking collections: the passages it is given at most, and (without a reranker) the cosine
# similarity a passage sharing no content word with the question needs to count as relevant; none
# relevant: the answer says nothing was found (docs/knowledge.md: why this figure for embed-2k).
KNOWLEDGE_ANSWER_PASSAGES = env_int("QWENWEB_KNOWLEDGE_ANSWER_PASSAGES", 6)
KNOWLEDGE_ANSWER_MIN_SIMILARITY = float(os.environ.get("QWENWEB_KNOWLEDGE_ANSWER_MIN_SIMILARITY", "0.83"))
