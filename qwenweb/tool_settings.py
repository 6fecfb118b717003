"""Settings of tools in the chat: the tool loop and the MCP servers staff register (part of ``settings``)."""

from __future__ import annotations

from qwenweb.env import env_int, env_names

# Tools in a chat turn (docs/tools.md, "The tool loop"): the model's tool calls a turn may make (then it
# answers without tools), how long a writing tool waits for the person's Allow, how long a tool may run,
# and how much of a tool's result goes back to the model.
CHAT_TOOL_STEP_LIMIT = env_int("QWENWEB_TOOL_STEP_LIMIT", 5)
CHAT_TOOL_APPROVAL_TIMEOUT_S = env_int("QWENWEB_TOOL_APPROVAL_TIMEOUT_S", 120)
CHAT_TOOL_TIMEOUT_S = env_int("QWENWEB_TOOL_TIMEOUT_S", 30)
CHAT_TOOL_RESULT_MAX_CHARS = env_int("QWENWEB_TOOL_RESULT_MAX_CHARS", 16_000)
# The built-in tools offered (names from chat.tools.builtin; empty: none, MCP tools only).
BUILTIN_TOOLS = ("calculator", "search_documents")
CHAT_TOOL_BUILTINS = env_names("QWENWEB_TOOL_BUILTINS", ",".join(BUILTIN_TOOLS), BUILTIN_TOOLS)
# MCP servers staff register (chat/tools/mcp, docs/tools.md): the most a server's answers to one call
# may weigh (read no further: the call ends with a message), and the limit on listing a server's tools.
MCP_MAX_RESULT_BYTES = env_int("QWENWEB_MCP_MAX_RESULT_BYTES", 1024 * 1024)
MCP_LIST_TIMEOUT_S = env_int("QWENWEB_MCP_LIST_TIMEOUT_S", 20)
