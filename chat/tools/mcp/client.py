"""The MCP client: one short session per call (a listing or a tool call) to a staff-registered server,
through the official SDK's Streamable HTTP transport over a `PinnedTransport`.

Runs in the web process, but no tool code does: the tool runs in its server. Every call has a limit in
seconds for all of it (handshake included); whatever goes wrong ends in an `McpError` whose message a
person reads. A server's answers are hostile content: text only comes back, cut to the byte cap.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx2
import mcp_types
from django.conf import settings
from django.utils.translation import gettext as _
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from chat.tools.mcp.addresses import parse_url
from chat.tools.mcp.errors import McpError
from chat.tools.mcp.selectors import Connection
from chat.tools.mcp.transport import PinnedTransport

logger = logging.getLogger(__name__)
T = TypeVar("T")
LIST_PAGES_MAX = 20
SERVER_TEXT_MAX_CHARS = 300
CLIENT_INFO = mcp_types.Implementation(name="qwenweb", version="1")


@dataclass(frozen=True)
class ListedTool:
    name: str
    title: str
    description: str
    input_schema: Any


@dataclass(frozen=True)
class CallOutcome:
    text: str
    is_error: bool
    bytes_read: int


def _megabytes(count: int) -> str:
    return f"{count / (1024 * 1024):.1f} MB"


def _failure(connection: Connection, transport: PinnedTransport, error: BaseException) -> McpError:
    """The message for what ended a call: what the transport refused first, then what the SDK said."""
    name = connection.name
    if transport.refusal == "address" and transport.address_error is not None:
        return transport.address_error
    if transport.refusal == "too_large":
        return McpError(
            _("The tool server %(name)s sent more than %(limit)s; the answer was not read further.")
            % {"name": name, "limit": _megabytes(transport.max_bytes)}
        )
    if transport.refusal == "redirect":
        return McpError(
            _("The tool server %(name)s answered with a redirect, which is not followed: register its final address.")
            % {"name": name}
        )
    if transport.refusal == "origin":
        return McpError(_("The tool server %(name)s asked for a request elsewhere; refused.") % {"name": name})
    if transport.error_status in (401, 403):
        return McpError(
            _("The tool server %(name)s refused the credentials (HTTP %(status)s): check its headers.")
            % {"name": name, "status": transport.error_status}
        )
    found = _first(error, MCPError)
    if found is not None:
        detail = str(found.error.message)[:SERVER_TEXT_MAX_CHARS]
        return McpError(
            _("The tool server %(name)s answered with an error: %(detail)s") % {"name": name, "detail": detail}
        )
    return McpError(_("The tool server %(name)s could not be reached.") % {"name": name})


def _first(error: BaseException, kind: type[BaseException]) -> Any:
    if isinstance(error, kind):
        return error
    for inner in getattr(error, "exceptions", ()):
        found = _first(inner, kind)
        if found is not None:
            return found
    cause = error.__cause__ or error.__context__
    return _first(cause, kind) if cause is not None and cause is not error else None


async def _session(connection: Connection, timeout: float, work: Callable[[Client], Awaitable[T]]) -> tuple[T, int]:
    """`work` run in a fresh session; its value and the bytes read. Raises McpError."""
    endpoint = parse_url(connection.url)
    max_bytes = settings.MCP_MAX_RESULT_BYTES
    transport = PinnedTransport(endpoint, connection.addresses, max_bytes=max_bytes)
    http = httpx2.AsyncClient(
        transport=transport,
        headers=connection.headers,
        timeout=httpx2.Timeout(None),  # the call's one limit is fail_after's below: no other to race it
        follow_redirects=False,
        trust_env=False,
    )
    try:
        with anyio.fail_after(timeout):
            async with http:
                stream = streamable_http_client(connection.url, http_client=http, max_sse_event_size=max_bytes)
                async with Client(stream, mode="legacy", cache=None, client_info=CLIENT_INFO) as client:
                    value = await work(client)
    except Exception as error:  # a timeout, the SDK's own errors, transport errors, task groups of them
        if isinstance(error, TimeoutError) and not transport.refusal:
            failure = McpError(
                _("The tool server %(name)s did not answer within %(seconds)s s.")
                % {"name": connection.name, "seconds": f"{timeout:g}"}
            )
        else:
            failure = _failure(connection, transport, error)
        failure.bytes_read = transport.bytes_read
        logger.info("MCP server %s: %s (%s)", connection.name, failure, type(error).__name__)
        raise failure from None
    return value, transport.bytes_read


async def list_tools(connection: Connection, *, timeout: float) -> list[ListedTool]:
    """Every tool the server offers (`tools/list`, all pages up to a limit)."""

    async def work(client: Client) -> list[ListedTool]:
        tools: list[ListedTool] = []
        cursor: str | None = None
        for _page in range(LIST_PAGES_MAX):
            page = await client.list_tools(cursor=cursor)
            for tool in page.tools:
                description = tool.description or ""
                tools.append(ListedTool(tool.name, tool.title or "", description, tool.input_schema))
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    tools, _read = await _session(connection, timeout, work)
    return tools


def _text_of(result: mcp_types.CallToolResult) -> str:
    parts: list[str] = []
    for item in result.content:
        if isinstance(item, mcp_types.TextContent):
            parts.append(item.text)
        else:
            parts.append(f"[{item.type}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


async def call_tool(connection: Connection, name: str, arguments: dict[str, Any], *, timeout: float) -> CallOutcome:
    """The tool's answer as text (`is_error` when the tool itself said it failed). Raises McpError."""

    async def work(client: Client) -> mcp_types.CallToolResult:
        return await client.call_tool(name, arguments)

    result, read = await _session(connection, timeout, work)
    return CallOutcome(_text_of(result), bool(result.is_error), read)
