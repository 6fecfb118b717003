"""The documents' calls to the model: a chat completion's whole text, as a summary's parts
(``summary_run``) and the scan reader's pages (``scan_reading``) ask for it, on the serving slot
they hold (watched for a frozen server like every request)."""

from __future__ import annotations

from monitor.public import ServingSlot


async def completion_text(slot: ServingSlot, payload: dict) -> str:
    """The whole text of a streamed chat completion."""
    parts: list[str] = []
    async for batch in slot.stream_chat(payload):
        for item in batch:
            for choice in item.get("choices") or ():
                parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts)
