"""The models an API caller may name: the profiles people may use, as OpenAI's model list."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from chat.api.errors import not_found
from monitor.public import user_profiles


async def list_models() -> dict:
    """OpenAI's model list (id: the profile's name), each with what it answers (``kind``: chat, embedding or
    rerank: /v1/chat/completions and /v1/completions, /v1/embeddings, /v1/rerank)."""
    rows = await sync_to_async(list)(user_profiles().values_list("name", "updated_at", "kind"))
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": int(updated.timestamp()), "owned_by": "qwenweb", "kind": kind}
            for name, updated, kind in rows
        ],
    }


async def get_model(name: str) -> dict:
    for item in (await list_models())["data"]:
        if item["id"] == name:
            return item
    raise not_found(name)
