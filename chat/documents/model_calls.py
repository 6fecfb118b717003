"""The documents' calls to the model: a chat completion's whole text, as a summary's parts
(``summary_run``) and the scan reader's pages (``scan_reading``) ask for it, through the
profile's one llama-server client."""

from __future__ import annotations

from monitor.public import LlamaClient


async def completion_text(client: LlamaClient, payload: dict) -> str:
    """The whole text of a streamed chat completion."""
    parts: list[str] = []
    async for batch in client.stream_chat(payload):
        for item in batch:
            for choice in item.get("choices") or ():
                parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts)
