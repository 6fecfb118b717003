"""Knowledge bases: collections of documents people share and ask across.

- ``selectors``: who may read or edit a collection (``readable_collections``: the one rule every path
  uses), its documents and their state.
- ``services``: the writes (create a collection, add a document, share, unshare, delete), with the limits.
- ``passages``: a read document's pages cut into overlapping passages of about N tokens, with their page.
- ``vectors``: vectors packed for the database and ranked by cosine similarity; the FTS5 words.
- ``embedder``: the embeddings and reranking profiles used, their calls through the fair queue.
- ``indexing``: the worker's side: a collection's document read by the documents' pipeline, cut, its
  passages embedded through the embeddings profile's fair queue as background work.
- ``search``: words (FTS5 bm25) and vectors fused by reciprocal rank fusion, then the reranker when one
  is served; only passages of collections the person may read.

How it works and its settings: docs/knowledge.md.
"""
