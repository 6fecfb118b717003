"""Tool calls as llama-server streams them (``delta.tool_calls``, parsed from the model's own template
by its --jinja chat handler), put together: the first piece of each carries its id and name, the
rest add to its arguments. The model's text is hostile: names and arguments are bounded as they come.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass

from chat.tools.arguments import MAX_ARGUMENT_CHARS

MAX_NAME_CHARS = 64
MAX_CALLS = 8


@dataclass
class ToolCall:
    id: str
    name: str = ""
    arguments: str = ""

    def message_entry(self) -> dict:
        """The call as the next request's assistant message carries it back (arguments that are not a
        JSON object go back as ``{}``: the template renders them as an object)."""
        try:
            arguments = self.arguments if isinstance(json.loads(self.arguments), dict) else "{}"
        except ValueError:
            arguments = "{}"
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": arguments}}


class ToolCalls:
    """The calls of one model step, by their index in the stream."""

    def __init__(self) -> None:
        self._calls: dict[int, ToolCall] = {}

    def feed(self, deltas: list) -> None:
        for delta in deltas if isinstance(deltas, list) else ():
            if not isinstance(delta, dict):
                continue
            index = delta.get("index", 0)
            call = self._calls.get(index) if isinstance(index, int) else None
            if call is None:
                if len(self._calls) >= MAX_CALLS or not isinstance(index, int):
                    continue
                call = self._calls[index] = ToolCall(id=str(delta.get("id") or "")[:64] or secrets.token_hex(6))
            function = delta.get("function") or {}
            if isinstance(function.get("name"), str) and len(call.name) < MAX_NAME_CHARS:
                call.name = (call.name + function["name"])[:MAX_NAME_CHARS]
            if isinstance(function.get("arguments"), str) and len(call.arguments) <= MAX_ARGUMENT_CHARS:
                call.arguments += function["arguments"][: MAX_ARGUMENT_CHARS + 1 - len(call.arguments)]

    def first(self) -> ToolCall | None:
        """The step's call (one per step: parallel calls are not asked for); None when the model answered."""
        return self._calls[min(self._calls)] if self._calls else None
