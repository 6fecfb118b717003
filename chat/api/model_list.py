"""The models an API caller may name: the profiles the key's owner may use (``profiles_for``: those of no
group, and those of the owner's groups), as OpenAI's model list."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from chat.accounts.profiles import profiles_for
from chat.api.errors import not_found


async def list_models(owner_id: int) -> dict:
    """OpenAI's model list (id: the profile's name), each with what it answers (``kind``: chat, embedding or
    rerank: /v1/chat/completions and /v1/completions, /v1/embeddings, /v1/rerank)."""
    rows = await sync_to_async(_rows)(owner_id)
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": int(updated.timestamp()), "owned_by": "qwenweb", "kind": kind}
            for name, updated, kind in rows
        ],
    }


def _rows(owner_id: int) -> list[tuple]:
    return list(profiles_for(owner_id).values_list("name", "updated_at", "kind"))


async def get_model(owner_id: int, name: str) -> dict:
    for item in (await list_models(owner_id))["data"]:
        if item["id"] == name:
            return item
    raise not_found(name)
