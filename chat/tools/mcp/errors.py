"""What can go wrong with an MCP server, as a message fit to show."""

from __future__ import annotations

from chat.errors import ChatError


class McpError(ChatError):
    """A server refused, unreachable, too slow, too big or broken; the message names which.

    `bytes_read`: what the call had read of the server's answers when it ended."""

    bytes_read: int = 0
