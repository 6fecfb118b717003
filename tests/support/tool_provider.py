"""A source of tools for the tool loop's tests, installed in a web process of their own (tests/support/tool_web.py).

A conversation titled ``tool:<name>`` is offered that one tool alone (and the MCP tools staff gave its
owner, if any), so the wired model (tests/support/qwen35.py) calls it: each tool's one argument is an
integer constant in its schema, which llama-server's tool grammar then writes whole (a string argument
of Qwen3.5's XML-like call format is free text the grammar does not hold to a constant). The tools:

- ``calculator``: the built-in calculator's own code, on the expression ``6*<n>`` (n = 7);
- ``write_note``: a writing tool; each run appends a line to ``<var>/tool-notes-<conversation>``;
- ``slow``: runs until the test creates ``<var>/tool-release-<conversation>`` (a hold the test releases);
- ``tally``: counts its runs in the conversation and answers ``tally <k>`` for the k-th (a turn of
  several steps tells each step's result from the others);
- ``nap``: sleeps ``NAP_S`` (5 s) and answers (bench/tool_bench.py);
- ``hang``: never answers (its timeout, 2 s, cuts it);
- ``broken``: raises;
- ``huge``: answers with 50 MB of text;
- ``hostile``: answers with HTML that would run script if it were rendered as it is (``HOSTILE``);
- ``strict``: its schema has a maximum of 10 beside the constant 12345 the grammar writes, so the
  loop's own check of the arguments refuses them.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from chat.tools.base import ToolResult, ToolSpec
from chat.tools.builtin import run_calculator

RELEASE_POLL_S = 0.05
NAP_S = 5.0
HOSTILE = (
    '<img src="x" onerror="window.toolResultRan = 1">'
    "<script>window.toolResultRan = 2</script>"
    '<button class="tool-allow" onclick="window.toolResultRan = 3">Allow</button>'
    " **bold** result"
)


def var_dir() -> Path:
    return Path(os.environ["QWENWEB_VAR_DIR"])


def notes_file(conversation_id) -> Path:
    return var_dir() / f"tool-notes-{conversation_id}"


def release_file(conversation_id) -> Path:
    return var_dir() / f"tool-release-{conversation_id}"


def tally_file(conversation_id) -> Path:
    return var_dir() / f"tool-tally-{conversation_id}"


def _fixed(value: int, **schema_extra) -> dict:
    return {
        "type": "object",
        "properties": {"n": {"type": "integer", "const": value, **schema_extra}},
        "required": ["n"],
        "additionalProperties": False,
    }


def specs(conversation_id: str) -> dict[str, ToolSpec]:
    def spec(name: str, parameters: dict, writes: bool = False, **extra) -> ToolSpec:
        return ToolSpec(name, f"The test tool {name}", parameters, writes, "test", key=conversation_id, **extra)

    return {
        "calculator": spec("calculator", _fixed(7)),
        "write_note": spec("write_note", _fixed(1), writes=True),
        "slow": spec("slow", _fixed(1)),
        "hang": spec("hang", _fixed(1), timeout_s=2),
        "tally": spec("tally", _fixed(1)),
        "nap": spec("nap", _fixed(1)),
        "hostile": spec("hostile", _fixed(1)),
        "huge": spec("huge", _fixed(1)),
        "broken": spec("broken", _fixed(1)),
        "strict": spec("strict", _fixed(12345, maximum=10)),
    }


class TestProvider:
    source = "test"

    def tools_for(self, user: Any, conversation: Any) -> list[ToolSpec]:
        title = conversation.title or ""
        if not title.startswith("tool:"):
            return []
        found = specs(str(conversation.id)).get(title.removeprefix("tool:"))
        return [found] if found else []

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], *, user: Any, timeout: float) -> ToolResult:
        if spec.name == "calculator":
            return run_calculator({"expression": f"6*{arguments['n']}"})
        if spec.name == "write_note":
            with notes_file(spec.key).open("a") as notes:
                notes.write(f"note {arguments['n']}\n")
            return ToolResult("saved")
        if spec.name == "tally":
            with tally_file(spec.key).open("a") as tally:
                tally.write("run\n")
            return ToolResult(f"tally {len(tally_file(spec.key).read_text().splitlines())}")
        if spec.name in ("slow", "hang"):
            release = release_file(spec.key)
            while spec.name == "hang" or not release.exists():
                await asyncio.sleep(RELEASE_POLL_S)
            return ToolResult("released")
        if spec.name == "nap":
            await asyncio.sleep(NAP_S)
            return ToolResult("rested")
        if spec.name == "huge":
            return ToolResult("x" * 50_000_000)
        if spec.name == "hostile":
            return ToolResult(HOSTILE)
        if spec.name == "broken":
            raise RuntimeError("the test tool broke")
        return ToolResult(f"ran {spec.name}")


def install() -> None:
    """This process's tool loop offers the test tools and the MCP tools staff give (no built-ins)."""
    from chat.tools import mcp, providers

    providers.PROVIDERS = (TestProvider(), mcp.PROVIDER)
