"""The sources of tools, in the order their tools are offered to the model."""

from __future__ import annotations

from typing import Any

from chat.tools import builtin, mcp
from chat.tools.base import ToolProvider, ToolResult, ToolSpec

PROVIDERS: tuple[ToolProvider, ...] = (builtin.PROVIDER, mcp.PROVIDER)


def tools_for(user: Any, conversation: Any) -> list[ToolSpec]:
    """Every tool this person may call in this conversation (names unique: a later duplicate is dropped)."""
    seen: set[str] = set()
    specs: list[ToolSpec] = []
    for provider in PROVIDERS:
        for spec in provider.tools_for(user, conversation):
            if spec.name not in seen:
                seen.add(spec.name)
                specs.append(spec)
    return specs


def as_now(spec: ToolSpec, user: Any, conversation: Any) -> ToolSpec | None:
    """The tool as its source offers it at this moment, or None: staff may have taken it away or marked it
    writing since the turn offered it (the loop asks before each call)."""
    same = (spec.source, spec.key, spec.name)
    offered = provider_for(spec).tools_for(user, conversation)
    return next((now for now in offered if (now.source, now.key, now.name) == same), None)


def provider_for(spec: ToolSpec) -> ToolProvider:
    for provider in PROVIDERS:
        if spec.source == provider.source or spec.source.startswith(provider.source + ":"):
            return provider
    raise LookupError(spec.source)


async def call(spec: ToolSpec, arguments: dict[str, Any], *, user: Any, timeout: float) -> ToolResult:
    return await provider_for(spec).call(spec, arguments, user=user, timeout=timeout)
