"""Tools offered by MCP servers staff register (Streamable HTTP). (Filled in by the MCP work.)"""

from __future__ import annotations

from typing import Any

from chat.tools.base import ToolResult, ToolSpec


class McpProvider:
    source = "mcp"

    def tools_for(self, user: Any, conversation: Any) -> list[ToolSpec]:
        return []

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], *, user: Any, timeout: float) -> ToolResult:
        return ToolResult(text="unknown tool", is_error=True)


PROVIDER = McpProvider()
