"""One chat turn run by the real turn runner against a given upstream (a fake one, named as
such by its test), with the real Redis queue; returns the events the page would get."""

from __future__ import annotations

import asyncio
import time

from chat.conversations.turns import TurnRunner
from chat.queue import FairQueue
from monitor.public import LlamaClient


def run_turn(upstream_url: str, conversation, assistant_id: int, user) -> list[dict]:
    events: list[dict] = []

    async def send(event: dict) -> None:
        events.append(event)

    async def main() -> None:
        client = LlamaClient(upstream_url)
        queue = FairQueue(name=f"turn{time.monotonic_ns()}")
        runner = TurnRunner(
            conversation=conversation, assistant_id=assistant_id, user_key=str(user.pk), send=send, client=client
        )
        runner.queue = queue
        try:
            await runner.run()
        finally:
            await client.aclose()
            await queue.aclose()

    asyncio.run(main())
    return events
