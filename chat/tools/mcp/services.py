"""Writes: staff add, change and remove MCP servers, list their tools again, and decide for each tool.

A save checks the address and pins what its host resolves to now (`addresses.py`); a listing keeps
every tool the server offers, new ones disabled and marked writing until staff decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from chat.errors import ChatError, NotFound
from chat.tools.mcp.addresses import addresses_to_pin, parse_url
from chat.tools.mcp.errors import McpError
from chat.tools.mcp.models import McpServer, McpTool
from chat.tools.mcp.schemas import schema_problem
from chat.tools.mcp.selectors import connection_of

DESCRIPTION_MAX_CHARS = 2000


@dataclass
class ServerValues:
    """What the server form posts, checked: headers to set (new or replaced) and names to remove."""

    name: str
    url: str
    enabled: bool = True
    set_headers: dict[str, str] = field(default_factory=dict, repr=False)
    remove_headers: list[str] = field(default_factory=list)


@dataclass
class ToolValues:
    enabled: bool
    writes: bool
    user_ids: list[int]
    group_ids: list[int]


def _server(server_id: int) -> McpServer:
    found = McpServer.objects.filter(pk=server_id).first()
    if found is None:
        raise NotFound(_("This tool server does not exist."))
    return found


def save_server(server_id: int | None, values: ServerValues) -> McpServer:
    """A new server, or one changed; its address pinned again either way."""
    name = " ".join(values.name.split())
    if not name:
        raise ChatError(_("Give the tool server a name."))
    if McpServer.objects.filter(name__iexact=name).exclude(pk=server_id).exists():
        raise ChatError(_("A tool server named %(name)s exists already.") % {"name": name})
    endpoint = parse_url(values.url)
    pinned = async_to_sync(addresses_to_pin)(endpoint)
    row = McpServer() if server_id is None else _server(server_id)
    headers = {key: value for key, value in row.headers.items() if key.lower() not in _lower(values.remove_headers)}
    for key, value in values.set_headers.items():
        headers = {old: kept for old, kept in headers.items() if old.lower() != key.lower()}
        headers[key] = value
    row.name, row.url, row.enabled, row.headers, row.addresses = name, endpoint.url, values.enabled, headers, pinned
    row.save()
    return row


def _lower(names: list[str]) -> set[str]:
    return {name.lower() for name in names}


def delete_server(server_id: int) -> str:
    row = _server(server_id)
    name = row.name
    row.delete()
    return name


def refresh_tools(server_id: int) -> int:
    """The server's tools listed again (`tools/list`); returns how many it offers. Raises McpError (its
    message also kept on the server for its page)."""
    row = _server(server_id)
    try:
        from chat.tools.mcp import client  # the SDK loads where a call is made (chat.tools.mcp)

        listed = async_to_sync(client.list_tools)(connection_of(row), timeout=settings.MCP_LIST_TIMEOUT_S)
    except McpError as error:
        McpServer.objects.filter(pk=row.pk).update(list_error=str(error))
        raise
    with transaction.atomic():
        seen = []
        for item in listed:
            problem = schema_problem(item.name, item.input_schema)
            tool, _made = McpTool.objects.update_or_create(
                server=row,
                name=item.name[:128],
                defaults={
                    "title": item.title[:200],
                    "description": item.description[:DESCRIPTION_MAX_CHARS],
                    "input_schema": item.input_schema if isinstance(item.input_schema, dict) else {},
                    "problem": problem,
                    "present": True,
                },
            )
            if problem and tool.enabled:
                McpTool.objects.filter(pk=tool.pk).update(enabled=False)
            seen.append(tool.pk)
        McpTool.objects.filter(server=row).exclude(pk__in=seen).update(present=False)
        McpServer.objects.filter(pk=row.pk).update(list_error="", listed_at=timezone.now())
    return len(listed)


def set_tool(server_id: int, tool_id: int, values: ToolValues) -> McpTool:
    """What staff decided for one tool. One whose listing found a problem cannot be enabled."""
    tool = McpTool.objects.filter(pk=tool_id, server_id=server_id).first()
    if tool is None:
        raise NotFound(_("This tool does not exist."))
    if values.enabled and (tool.problem or not tool.present):
        raise ChatError(
            _("The tool %(tool)s cannot be enabled: %(problem)s")
            % {
                "tool": tool.name,
                "problem": tool.problem or _("its server no longer offers it."),
            }
        )
    with transaction.atomic():
        tool.enabled, tool.writes = values.enabled, values.writes
        tool.save(update_fields=["enabled", "writes"])
        tool.users.set(values.user_ids)
        tool.groups.set(values.group_ids)
    return tool
