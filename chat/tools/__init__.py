"""Tools the model may call in a chat turn (issue 51).

`base` holds the contract every source of tools meets (`ToolSpec`, `ToolResult`, `ToolProvider`);
`providers` lists the sources: tools built into the product (`builtin`: calculator, search over the
person's documents and collections) and tools offered by MCP servers staff register (`mcp`). The
turn's tool loop asks `providers.tools_for` what a person may call and `providers.call` to run one.
"""
