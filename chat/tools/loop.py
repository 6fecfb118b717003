"""The tool loop of a chat turn: the model calls a tool, the tool runs, its result goes back, and the
answer goes on, up to CHAT_TOOL_STEP_LIMIT tool calls (then the model answers without tools).

Fair use of the GPU: each model step takes a serving slot and gives it back when its stream ends
(``TurnRunner._answer``), so no slot is held while a tool runs or waits for its person. The next
step waits in the fair queue like any request, as a follow-up of the same conversation: the
``affinity`` of the turn sends it to the node that has its prompt cached, and ``cache_prompt`` lets
llama-server reuse it. A tool is cut at CHAT_TOOL_TIMEOUT_S; a writing tool waits for its person's
Allow at most CHAT_TOOL_APPROVAL_TIMEOUT_S (chat.tools.approvals).

Every step is shown to the owner's pages as it changes (a ``tool`` event) and stored with the answer
(``Message.tool_steps``). Arguments are the model's text and results a tool's: both hostile. A stop
ends a waiting or running step as ``stopped`` and writes the steps before the turn's final write.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any, Protocol

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.models import Conversation
from chat.tools import providers
from chat.tools.approvals import approvals
from chat.tools.arguments import BadArguments, parse_arguments
from chat.tools.base import ToolResult, ToolSpec
from chat.tools.calls import ToolCall, ToolCalls
from chat.tools.services import save_tool_steps
from monitor.public import ServingPool

log = logging.getLogger(__name__)
SUMMED_STATS = ("prompt_tokens", "cached_tokens", "output_tokens", "model_ms")
SOURCE_GRACE_S = 1.0  # past a tool's limit, for its source's own message to come back


class Turn(Protocol):
    """What the loop needs of the turn it runs in (chat.conversations.turns.TurnRunner)."""

    conversation: Conversation
    assistant_id: int
    content: list[str]
    reasoning: list[str]
    tool_calls: ToolCalls | None

    async def _emit(self, event: dict) -> None: ...

    async def _answer(self, pool: ServingPool, payload: dict, started: float) -> dict: ...


async def tool_loop_for(turn: Turn, pool: ServingPool) -> ToolLoop | None:
    """The loop when the person turned tools on, the model's template can call them, and some are offered."""
    if not turn.conversation.tools_enabled or not pool.info.tools:
        return None
    user, specs = await database_sync_to_async(_offered)(turn.conversation)
    return ToolLoop(turn, pool, user, specs) if specs else None


def _offered(conversation: Conversation) -> tuple[Any, list[ToolSpec]]:
    user = get_user_model().objects.get(pk=conversation.owner_id)
    return user, providers.tools_for(user, conversation)


def step_messages(text: str, thought: str, call: ToolCall, result: str) -> list[dict]:
    """A step as the next request carries it: the model's message with its thought, then the tool's result.
    Qwen3.5's template keeps the current turn's thoughts, so the model reads its own again, and the
    follow-up's prompt is what the model wrote, which llama-server's cache holds (a hybrid model's too,
    docs/tools.md); without the thought the template renders an empty one in its place."""
    said = {"role": "assistant", "content": text, "tool_calls": [call.message_entry()]}
    if thought:
        said["reasoning_content"] = thought
    return [said, {"role": "tool", "tool_call_id": call.id, "content": result}]


class ToolLoop:
    def __init__(self, turn: Turn, pool: ServingPool, user: Any, specs: list[ToolSpec]):
        self.turn = turn
        self.pool = pool
        self.user = user
        self.specs = {spec.name: spec for spec in specs}
        self.steps: list[dict] = []

    async def run(self, payload: dict, started: float) -> dict:
        """Model steps and tool calls until the model answers; the answer's stats (tokens summed over steps)."""
        payload = {
            **payload,
            "tools": [spec.openai_tool() for spec in self.specs.values()],
            "parallel_tool_calls": False,
            "cache_prompt": True,
        }
        messages = list(payload["messages"])
        totals: dict = {}
        try:
            while True:
                last = len(self.steps) >= settings.CHAT_TOOL_STEP_LIMIT
                calls = ToolCalls()
                self.turn.tool_calls = calls
                text_from, thought_from = len(self.turn.content), len(self.turn.reasoning)
                request = {**payload, "messages": messages, "tool_choice": "none" if last else "auto"}
                stats = await self.turn._answer(self.pool, request, started)
                self.turn.tool_calls = None
                _add(totals, stats)
                call = calls.first()
                if call is None or last:
                    notice = await self._limit_notice() if last else ""  # kept with the answer (TurnRunner.run)
                    # The last request resumed after a tool: how much of its prompt llama-server had cached.
                    followup = {name: stats.get(name) for name in ("prompt_tokens", "cached_tokens")}
                    return {**stats, **totals, "tool_steps": len(self.steps), "followup": followup, "notice": notice}
                text, thought = "".join(self.turn.content[text_from:]), "".join(self.turn.reasoning[thought_from:])
                result = await self._step(call)
                messages += step_messages(text, thought, call, result.text)
        except asyncio.CancelledError:
            await asyncio.shield(self._stopped())
            raise
        finally:
            self.turn.tool_calls = None

    async def _limit_notice(self) -> str:
        limit = settings.CHAT_TOOL_STEP_LIMIT
        text = ngettext(
            "The model reached the limit of %(count)d tool call in one answer, so it answered without more tools.",
            "The model reached the limit of %(count)d tool calls in one answer, so it answered without more tools.",
            limit,
        ) % {"count": limit}
        await self.turn._emit({"type": "notice", "text": text})
        return text

    async def _step(self, call: ToolCall) -> ToolResult:
        """One tool call: checked, approved when it writes, run, its result bounded; shown and stored at each change."""
        offered = self.specs.get(call.name)
        # Asking first follows the tool's writing mark as it is now, not as it was when the turn began.
        spec = offered and await database_sync_to_async(providers.as_now)(offered, self.user, self.turn.conversation)
        step = {
            "id": secrets.token_hex(8),
            "name": call.name[:64],
            "title": (offered.title or offered.name) if offered else call.name[:64],
            "arguments": call.arguments[:2000],
            "writes": bool(spec and spec.writes),
            "state": "running",
            "result": "",
        }
        self.steps.append(step)
        if offered is None:
            return await self._end(step, _("The model asked for a tool that does not exist here."), "error")
        if spec is None:
            return await self._end(
                step, _("The tool %(tool)s is not available to you.") % {"tool": offered.name}, "error"
            )
        try:
            arguments = parse_arguments(call.arguments, spec.parameters)
        except BadArguments as error:
            return await self._end(step, _("The tool's arguments were not valid: %(why)s") % {"why": error}, "error")
        if spec.writes and not await self._allowed(step):
            return await self._end(step, step["result"], "denied")
        await self._show(step)
        began = time.monotonic()
        result = await self._call(spec, arguments)
        step["ms"] = round((time.monotonic() - began) * 1000)
        return await self._end(step, result.text, "error" if result.is_error else "done")

    async def _allowed(self, step: dict) -> bool:
        """Wait for the person's Allow (the slot is not held meanwhile); a time limit counts as Deny."""
        step["state"] = "waiting"
        await self._show(step)
        limit = settings.CHAT_TOOL_APPROVAL_TIMEOUT_S
        with approvals.waiting(step["id"], self.turn.conversation.owner_id) as decision:
            try:
                allowed = await asyncio.wait_for(decision, limit)
            except TimeoutError:
                step["result"] = ngettext(
                    "No one allowed this tool within %(s)d second, so it did not run.",
                    "No one allowed this tool within %(s)d seconds, so it did not run.",
                    int(limit),
                ) % {"s": limit}
                return False
        if not allowed:
            step["result"] = _("You denied this tool call, so it did not run.")
        step["state"] = "running"
        return allowed

    async def _call(self, spec: ToolSpec, arguments: dict) -> ToolResult:
        timeout = spec.timeout_s or settings.CHAT_TOOL_TIMEOUT_S
        try:
            # A source that keeps the limit itself speaks first (an MCP call names its server); this cuts the others.
            called = providers.call(spec, arguments, user=self.user, timeout=timeout)
            result = await asyncio.wait_for(called, timeout + SOURCE_GRACE_S)
        except TimeoutError:
            return ToolResult(
                ngettext(
                    "The tool did not answer within %(s)d second and was stopped.",
                    "The tool did not answer within %(s)d seconds and was stopped.",
                    int(timeout),
                )
                % {"s": timeout},
                True,
            )
        except Exception:
            log.warning("tool %s failed", spec.name, exc_info=True)
            return ToolResult(_("The tool failed; nothing came back from it."), True)
        limit = settings.CHAT_TOOL_RESULT_MAX_CHARS
        if len(result.text) > limit:
            note = ngettext(
                "[The tool's result was cut to %(n)d character.]",
                "[The tool's result was cut to %(n)d characters.]",
                limit,
            ) % {"n": limit}
            return ToolResult(result.text[:limit] + "\n" + note, result.is_error, result.meta)
        return result

    async def _end(self, step: dict, text: str, state: str) -> ToolResult:
        step["result"], step["state"] = text, state
        await self._show(step)
        return ToolResult(text, is_error=state != "done")

    async def _show(self, step: dict) -> None:
        await database_sync_to_async(save_tool_steps)(self.turn.assistant_id, [dict(s) for s in self.steps])
        await self.turn._emit({"type": "tool", "step": dict(step)})

    async def _stopped(self) -> None:
        """Stop while a step waited or ran: it ends as stopped, and the steps are written before the answer is."""
        for step in self.steps:
            if step["state"] in ("running", "waiting"):
                step["state"], step["result"] = "stopped", _("Stopped before the tool finished.")
                await self._show(step)


def _add(totals: dict, stats: dict) -> None:
    for name in SUMMED_STATS:
        if stats.get(name) is not None:
            totals[name] = round(totals.get(name, 0) + stats[name], 1)
