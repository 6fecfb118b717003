"""One chat turn run by the real turn runner against a given upstream (a fake one, named as
such by its test), through a remote profile that points at it, the real serving slot and the
real Redis queue; returns the events the page would get."""

from __future__ import annotations

import asyncio
import uuid

from chat.conversations.turns import TurnRunner
from chat.models import Conversation
from monitor.models import ServerProfile
from monitor.redis_clients import close_loop_clients


def upstream_profile(upstream_url: str, api_key: str = "") -> ServerProfile:
    """A remote profile (its own llama-server, no node of ours) for the upstream at ``upstream_url``."""
    name = f"upstream-{uuid.uuid4().hex[:8]}"
    return ServerProfile.objects.create(name=name, remote_url=upstream_url, remote_api_key=api_key)


def run_turn(upstream_url: str, conversation: Conversation, assistant_id: int, user) -> list[dict]:
    events: list[dict] = []
    conversation.profile = upstream_profile(upstream_url)
    Conversation.objects.filter(id=conversation.id).update(profile=conversation.profile)

    async def send(event: dict) -> None:
        events.append(event)

    async def main() -> None:
        runner = TurnRunner(conversation=conversation, assistant_id=assistant_id, user_key=str(user.pk), send=send)
        try:
            await runner.run()
        finally:
            await close_loop_clients()

    asyncio.run(main())
    return events
