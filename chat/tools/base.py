"""The contract between the chat's tool loop and the sources of tools."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolSpec:
    """One tool as offered to the model in one turn.

    `name` is what the model sees and calls (unique within a turn, `^[a-zA-Z0-9_-]{1,64}$`);
    `source` names where it runs ("builtin", or "mcp:<server id>"); `writes` makes the loop ask the
    person before it runs; `parameters` is the JSON schema the arguments are checked against.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    writes: bool
    source: str
    key: str = ""  # the provider's own handle (an MCP tool's row id, a built-in's name)
    title: str = ""  # what the page shows (defaults to name)
    timeout_s: float = 0  # how long one call may run; 0: QWENWEB_TOOL_TIMEOUT_S (the loop cuts it there)

    def openai_tool(self) -> dict[str, Any]:
        """The entry for the `tools` list sent to llama-server."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True)
class ToolResult:
    """What a tool gave back: text for the model (hostile content), and whether it is an error
    the person should read (a server down, a timeout, a result too big)."""

    text: str
    is_error: bool = False
    meta: dict[str, Any] = field(default_factory=dict)


class ToolProvider(Protocol):
    """A source of tools: which a person may call in a conversation, and how to run one."""

    source: str

    def tools_for(self, user: Any, conversation: Any) -> list[ToolSpec]: ...

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], *, user: Any, timeout: float) -> ToolResult: ...
