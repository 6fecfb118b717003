"""What staff do on the Tool servers page (`/staff/tools/`) in the MCP tests: register a test server
(tests/support/mcp_server.py) and decide per tool who gets it, through the page as staff would."""

from __future__ import annotations

import uuid

from django.test import Client

from chat.tools.mcp.models import McpServer, McpTool
from tests.support.client import make_user
from tests.support.mcp_server import McpTestServer


def staff_page() -> Client:
    page = Client(SERVER_NAME="127.0.0.1")
    page.force_login(make_user(is_staff=True))
    return page


def register(page: Client, server: McpTestServer, prefix: str = "tickets", more_headers: str = "") -> McpServer:
    """``server`` added through the staff page with its secret as a header, its tools listed."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    headers = "\n".join(filter(None, [f"Authorization: Bearer {server.secret}", more_headers]))
    answer = page.post("/staff/tools/new/", {"name": name, "url": server.url, "enabled": "on", "headers": headers})
    row = McpServer.objects.get(name=name)
    assert answer.status_code == 302 and answer["Location"] == f"/staff/tools/{row.pk}/"
    return row


def tool(server: McpServer, name: str) -> McpTool:
    return McpTool.objects.get(server=server, name=name)


def give(page: Client, server: McpServer, name: str, *, writes: bool, users=(), groups=(), enabled=True):
    posted = {"writes": "1" if writes else "0", "users": [u.pk for u in users], "groups": [g.pk for g in groups]}
    if enabled:
        posted["enabled"] = "on"
    answer = page.post(f"/staff/tools/{server.pk}/t/{tool(server, name).pk}/", posted)
    assert answer.status_code == 302
