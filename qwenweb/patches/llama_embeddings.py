"""A change to the pinned llama.cpp source, applied by ``scripts/build_llama_server.py`` before it builds
llama-server (never imported by a product process): a pooled embedding or a rerank leaves the
output layer out of its graph, for the architectures of the embedders and rerankers qwenweb serves
that have one (Gemma 3: the default model's embeddings profile; Qwen3: Qwen3-Embedding and
Qwen3-Reranker of the catalog).

Their graphs end in the output layer (the ``vocabulary x hidden`` product, on every token) even
when the context only pools embeddings and nobody reads the logits (llama.cpp issue 24713; PR 25964,
open, adds an option for it). llama.cpp's own Llama graph leaves it out when it only embeds
(``graph<embed>``); the change does the same where the context embeds with pooling (``none``
answers the per-token rows, and keeps the logits) and has no samplers. A context that also
generates builds its graph again when it switches (``cparams.embeddings`` is part of a graph's
reuse check). For the default model's 262,144-word vocabulary the output layer is most of an
embedding's time on a CPU: figures in docs/knowledge.md (``kb_query_p95_ms``).

The guard: the build stops unless each file, as the pinned sdist has it, is byte for byte the one the
change was written for (``FILES``: its sha256) with the anchor once. Each build writes the files afresh
from the sdist (a tree patched before, or by hand, is made right). The install folder's name carries
``tag()``, so a changed patch is built afresh.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

FILES = {
    "src/models/gemma3.cpp": "f6b81e063962009e1c8356b77287bfb62dfe935a44e31669ef3c39f4de306736",
    "src/models/qwen3.cpp": "06f400665980d30fd357886a5d14b541adda06d159a5b7f0ce929ca36788778c",
}
MARK = "// qwenweb patch: llama_embeddings"
ANCHOR = """    res->t_embd = cur;

    // lm_head
"""
SAID = "qwenweb: the output layer is left out of pooled embeddings' graphs"
INSERT = (
    """    res->t_embd = cur;

    """
    + MARK
    + r""" (qwenweb/patches/llama_embeddings.py): a pooled embedding reads no logits
    if (cparams.embeddings && pooling_type != LLAMA_POOLING_TYPE_NONE && samplers.empty()) {
        LLAMA_LOG_DEBUG("%s: """
    + SAID
    + r"""\n", __func__);
        ggml_build_forward_expand(gf, cur);
        return;
    }

    // lm_head
"""
)


def tag() -> str:
    """Eight hex digits that change with the patch (the install folder's suffix)."""
    return hashlib.sha256(repr((FILES, ANCHOR, INSERT)).encode()).hexdigest()[:8]


def apply(tree: Path, pinned_text: Callable[[str], str]) -> None:
    """Write the patched files into ``tree`` (the unpacked ``llama.cpp`` folder), each made from
    ``pinned_text(name)`` (the file as the pinned sdist has it), whatever the tree holds now."""
    for name, pinned in FILES.items():
        text = pinned_text(name)
        actual = hashlib.sha256(text.encode()).hexdigest()
        if actual != pinned or text.count(ANCHOR) != 1:
            raise SystemExit(
                f"qwenweb/patches/llama_embeddings.py was written for another {name} (sha256 {actual}): "
                "review it against this llama.cpp before building"
            )
        patched = text.replace(ANCHOR, INSERT)
        path = tree / name
        if not path.exists() or path.read_text() != patched:
            path.write_text(patched)
