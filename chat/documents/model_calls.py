"""The documents' calls to the model: a chat completion's whole text, as a summary's parts
(``summary_run``) and the scan reader's pages (``scan_reading``) ask for it, on the serving slot
they hold (watched for a frozen server like every request). Each call leaves its row in the usage
ledger, for the document's owner (the slot's queue owner, ``owner:<id>``, as both ask for it)."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from chat.usage import services as ledger
from chat.usage.entries import document_entry
from monitor.public import ServingSlot

OWNER_PREFIX = "owner:"


async def completion_text(slot: ServingSlot, payload: dict) -> str:
    """The whole text of a streamed chat completion."""
    parts: list[str] = []
    timings: dict = {}
    try:
        async for batch in slot.stream_chat(payload):
            for item in batch:
                timings = item.get("timings") or timings
                for choice in item.get("choices") or ():
                    parts.append((choice.get("delta") or {}).get("content") or "")
    finally:
        owner = slot.grant.owner.removeprefix(OWNER_PREFIX)
        if owner.isdigit():
            await sync_to_async(ledger.record)(document_entry(int(owner), slot, timings))
    return "".join(parts)
