"""Tools offered by MCP servers staff register (Streamable HTTP, the official `mcp` SDK as client).

Staff add servers and decide per tool (enabled, reading or writing, who may use it) on the staff page
(`chat/web/mcp_views.py`): `models.py`, `services.py` (writes), `selectors.py` (reads), `forms.py`.
A call (`client.py`) is one short session over `transport.py` (the staff-entered origin at a pinned
address, no redirect, a byte cap), its arguments checked first against the tool's schema
(`schemas.py`). `PROVIDER` is this source for the turn's tool loop (docs/tools.md, "MCP servers").
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.utils.translation import gettext as _

from chat.tools.base import ToolResult, ToolSpec
from chat.tools.mcp import selectors
from chat.tools.mcp.errors import McpError
from chat.tools.mcp.schemas import arguments_problem

TOOL_TEXT_MAX_CHARS = 300


class McpProvider:
    source = "mcp"

    def tools_for(self, user: Any, conversation: Any) -> list[ToolSpec]:
        """The MCP tools this person may call (the conversation does not narrow them here)."""
        return [
            ToolSpec(
                name=tool.name,
                description=tool.description,
                parameters=tool.input_schema,
                writes=tool.writes,
                source=f"mcp:{tool.server_id}",
                key=str(tool.pk),
                title=tool.title or tool.name,
            )
            for tool in selectors.usable_tools(user)
        ]

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], *, user: Any, timeout: float) -> ToolResult:
        """The tool run on its server; every failure is a ToolResult(is_error=True) a person reads."""
        tool_id = int(spec.key) if spec.key.isdigit() else 0
        found = await sync_to_async(selectors.callable_tool)(tool_id, user)
        if found is None:
            return ToolResult(_("The tool %(tool)s is not available to you.") % {"tool": spec.name}, is_error=True)
        tool, connection = found
        if tool.writes and not spec.writes:  # marked writing since the loop read the mark, which asks first
            message = _("The tool %(tool)s was marked as writing during this answer, so it did not run unasked.")
            return ToolResult(message % {"tool": spec.name}, is_error=True)
        problem = arguments_problem(tool.input_schema, arguments)
        if problem:
            return ToolResult(problem, is_error=True)
        from chat.tools.mcp import client  # the SDK takes half a second to import: not in every process's start

        try:
            outcome = await client.call_tool(connection, tool.name, arguments, timeout=timeout)
        except McpError as error:
            return ToolResult(str(error), is_error=True, meta={"bytes_read": error.bytes_read})
        meta = {"bytes_read": outcome.bytes_read}
        if outcome.is_error:
            message = _("The tool %(tool)s failed: %(detail)s") % {
                "tool": tool.name,
                "detail": outcome.text[:TOOL_TEXT_MAX_CHARS],
            }
            return ToolResult(message, is_error=True, meta=meta)
        return ToolResult(outcome.text, meta=meta)


PROVIDER = McpProvider()
