"""Tools built into the product, offline: a calculator and a search over the person's own documents
and the knowledge collections they may read.

Both only read. The search asks ``readable_collections`` at every call (through chat.knowledge's
search) and takes the person's own documents by owner, so a passage another person's access
covers never reaches this person's model.
"""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils.translation import gettext as _

from chat.documents.retrieval import Passage, rank_passages, split_passages
from chat.knowledge.search import search as search_collections
from chat.knowledge.selectors import readable_collections
from chat.models import Document, DocumentPage
from chat.tools.base import ToolResult, ToolSpec
from chat.tools.calculator import CalculationError, calculate

SEARCH_RESULTS = 6
OWN_DOCUMENTS_SEARCHED = 50  # the newest ready ones

CALCULATOR = ToolSpec(
    name="calculator",
    title="Calculator",
    description="Computes an arithmetic expression exactly: numbers, + - * / // % ** and parentheses.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "For example (3 + 4) * 2 ** 10"}},
        "required": ["expression"],
        "additionalProperties": False,
    },
    writes=False,
    source="builtin",
    key="calculator",
)
SEARCH_DOCUMENTS = ToolSpec(
    name="search_documents",
    title="Search documents",
    description=(
        "Searches the user's own documents and the knowledge collections they may read; "
        "returns the best matching passages with where each comes from."
    ),
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "Words to look for", "maxLength": 500}},
        "required": ["query"],
        "additionalProperties": False,
    },
    writes=False,
    source="builtin",
    key="search_documents",
)


def run_calculator(arguments: dict[str, Any]) -> ToolResult:
    try:
        return ToolResult(text=str(calculate(arguments.get("expression", ""))))
    except CalculationError as error:
        return ToolResult(text=str(error), is_error=True)


def _own_passages(user, query: str) -> list[Passage]:
    """Passages of the person's own ready documents (not those of collections: their access is the collection's)."""
    documents = (
        Document.objects.filter(owner=user, status=Document.Status.READY, collection_entry__isnull=True)
        .order_by("-created_at")
        .only("id", "name", "kind")[:OWN_DOCUMENTS_SEARCHED]
    )
    by_id = {document.id: document for document in documents}
    rows = (
        DocumentPage.objects.filter(document__in=list(by_id))
        .exclude(text="")
        .values_list("document_id", "number", "text")
    )
    passages = [
        passage
        for document_id, number, text in rows
        for passage in split_passages(
            by_id[document_id].name, number, text, by_id[document_id].kind in Document.SECTIONED
        )
    ]
    return rank_passages(query, passages)[:SEARCH_RESULTS]


def _readable_ids(user) -> list[int]:
    return list(readable_collections(user).values_list("pk", flat=True))


async def search_documents(user, arguments: dict[str, Any]) -> ToolResult:
    query = str(arguments.get("query", "")).strip()
    if not query:
        return ToolResult(text=_("The query is empty."), is_error=True)
    own = await sync_to_async(_own_passages)(user, query)
    collection_ids = await sync_to_async(_readable_ids)(user)
    found = await search_collections(user, collection_ids, query, SEARCH_RESULTS) if collection_ids else []
    parts = [passage.render() for passage in own]
    parts += [f"[{f.collection} / {f.document}, p. {f.page}]\n{f.text}" for f in found]
    if not parts:
        return ToolResult(text=_("Nothing in the user's documents or collections matches."))
    return ToolResult(text="\n\n".join(parts), meta={"passages": len(parts)})


class BuiltinProvider:
    source = "builtin"

    def tools_for(self, user: Any, conversation: Any) -> list[ToolSpec]:
        """The built-ins staff left on (QWENWEB_TOOL_BUILTINS), in this order."""
        offered = settings.CHAT_TOOL_BUILTINS
        return [spec for spec in (CALCULATOR, SEARCH_DOCUMENTS) if spec.name in offered]

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], *, user: Any, timeout: float) -> ToolResult:
        if spec.key == CALCULATOR.key:
            return run_calculator(arguments)
        if spec.key == SEARCH_DOCUMENTS.key:
            return await asyncio.wait_for(search_documents(user, arguments), timeout)
        return ToolResult(text=_("This tool is not built in."), is_error=True)


PROVIDER = BuiltinProvider()
