"""Tools built into the product, offline: a calculator and a search over the person's documents and
knowledge collections. (Filled in by the tool loop's work.)"""

from __future__ import annotations

from typing import Any

from chat.tools.base import ToolResult, ToolSpec


class BuiltinProvider:
    source = "builtin"

    def tools_for(self, user: Any, conversation: Any) -> list[ToolSpec]:
        return []

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], *, user: Any, timeout: float) -> ToolResult:
        return ToolResult(text="unknown tool", is_error=True)


PROVIDER = BuiltinProvider()
