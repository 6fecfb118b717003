"""Reads: the servers and tools for the staff page, the tools a person may call, what a call needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Count, Q, QuerySet

from chat.tools.mcp.models import McpServer, McpTool


@dataclass(frozen=True)
class Connection:
    """What a call needs to know of a server (read from its row): never logged whole (headers)."""

    name: str
    url: str
    headers: dict[str, str] = field(repr=False)
    addresses: list[str]


def server_rows() -> QuerySet[McpServer]:
    """Every server with how many tools it lists and how many are enabled (headers stay in the row)."""
    return McpServer.objects.annotate(
        tool_count=Count("tools", filter=Q(tools__present=True), distinct=True),
        enabled_count=Count("tools", filter=Q(tools__present=True, tools__enabled=True), distinct=True),
    )


def server(server_id: int) -> McpServer | None:
    return McpServer.objects.filter(pk=server_id).first()


def tool_rows(server_id: int) -> list[dict[str, Any]]:
    """The server's tools for its page: what staff decided for each, and who may use it."""
    rows = []
    for tool in McpTool.objects.filter(server_id=server_id).prefetch_related("users", "groups"):
        rows.append(
            {
                "tool": tool,
                "user_ids": {user.pk for user in tool.users.all()},
                "group_ids": {group.pk for group in tool.groups.all()},
            }
        )
    return rows


def people_and_groups() -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Who staff may give a tool to: active people and every group, by name."""
    people = list(get_user_model().objects.filter(is_active=True).order_by("username").values_list("pk", "username"))
    return people, list(Group.objects.order_by("name").values_list("pk", "name"))


def usable_tools(user: Any) -> QuerySet[McpTool]:
    """The tools this person may call: enabled, still listed, sound, on an enabled server, and given to
    them by name or through one of their groups (a tool given to no one is used by no one)."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return McpTool.objects.none()
    given = Q(users=user) | Q(groups__in=user.groups.all())
    ids = McpTool.objects.filter(given).values("pk")
    return (
        McpTool.objects.filter(pk__in=ids, enabled=True, present=True, problem="", server__enabled=True)
        .select_related("server")
        .order_by("server__name", "name")
    )


def connection_of(server_row: McpServer) -> Connection:
    return Connection(server_row.name, server_row.url, dict(server_row.headers), list(server_row.addresses))


def callable_tool(tool_id: int, user: Any) -> tuple[McpTool, Connection] | None:
    """The tool and its server's connection, if this person may call it now (asked again at each call:
    staff may have taken it away since the turn began)."""
    tool = usable_tools(user).filter(pk=tool_id).first()
    if tool is None:
        return None
    return tool, connection_of(tool.server)
