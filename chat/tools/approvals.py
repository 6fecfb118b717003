"""Writing tools waiting for their person's Allow or Deny, in the web process that runs the answer.

A decision comes only from a chat socket of the conversation's owner (``decide``, called by the
consumer for a ``tool_decision`` frame) and names the step by the id this process gave it: nothing
a model writes or a tool returns reaches here, so no tool result can approve anything.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator


class Approvals:
    def __init__(self) -> None:
        self._waiting: dict[str, tuple[object, asyncio.Future[bool]]] = {}

    @contextlib.contextmanager
    def waiting(self, step_id: str, owner_id: object) -> Iterator[asyncio.Future[bool]]:
        """A future the owner's decision resolves (True: allowed); gone when the block ends."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting[step_id] = (owner_id, future)
        try:
            yield future
        finally:
            self._waiting.pop(step_id, None)

    def decide(self, step_id: str, owner_id: object, allow: bool) -> bool:
        """The owner's answer for a waiting step; False when none waits (decided, timed out, another's)."""
        waiting = self._waiting.get(step_id)
        if waiting is None or waiting[0] != owner_id or waiting[1].done():
            return False
        waiting[1].set_result(allow)
        return True

    def pending(self) -> int:
        return len(self._waiting)


# One for the process, like the running answers (chat.conversations.runs).
approvals = Approvals()
