"""The MCP servers staff register and the tools each offers (rows of the `chat` app).

Kept beside the MCP client rather than in `chat/models.py` (which is at the line cap); registered with
the app by `chat.apps.ChatConfig.ready`, their migration is the chat app's like any other.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class McpServer(models.Model):
    """An MCP server (Streamable HTTP) at the address staff entered.

    `headers` are sent with every request (often a secret: never shown back in a page nor logged).
    `addresses` are the IP addresses the host resolved to when staff saved it: a call goes only to
    one of them (docs/tools.md, "MCP servers")."""

    name = models.CharField(_("name"), max_length=100, unique=True)
    url = models.CharField(_("address"), max_length=500)
    headers = models.JSONField(default=dict, blank=True)
    addresses = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(_("enabled"), default=True)
    listed_at = models.DateTimeField(null=True, blank=True)  # the last tools/list that answered
    list_error = models.TextField(blank=True)  # why the last tools/list failed (shown to staff)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "chat"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class McpTool(models.Model):
    """A tool a server listed, with what staff decided: enabled or not, reading or writing (writing
    until staff say otherwise: the person is asked before it runs), and who may use it (named people
    and groups; none chosen: no one)."""

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=128)
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    input_schema = models.JSONField(default=dict, blank=True)
    # Why this tool cannot be offered (an invalid schema or name), as listing found it; empty: fine.
    problem = models.TextField(blank=True)
    present = models.BooleanField(default=True)  # offered by the server at its last listing
    enabled = models.BooleanField(_("enabled"), default=False)
    writes = models.BooleanField(_("writes"), default=True)
    users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="mcp_tools")
    groups = models.ManyToManyField("auth.Group", blank=True, related_name="mcp_tools")

    class Meta:
        app_label = "chat"
        ordering = ["server", "name"]
        constraints = [models.UniqueConstraint(fields=["server", "name"], name="mcp_tool_unique")]

    def __str__(self) -> str:
        return f"{self.server}: {self.name}"
