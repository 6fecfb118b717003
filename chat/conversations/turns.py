"""One assistant turn: fit the history, wait for a serving slot, stream, persist.

Events go to ``send`` as they happen (the consumer forwards them to the page);
the text so far is written in the background (``progress``) at most every
CHAT_SAVE_INTERVAL_S, so delivery never waits on the database.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing

from channels.db import database_sync_to_async
from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.conversations import progress
from chat.conversations.context import documents_budget, fit_messages, with_system_prompt
from chat.conversations.messages import build_messages, has_images
from chat.conversations.presets import sampling_fields
from chat.conversations.resume import AnswerSoFar, Cut, ResumeRefused, carry_on
from chat.conversations.selectors import TurnInputs, turn_inputs
from chat.conversations.services import finish_message
from chat.documents.citations import CitationStream
from chat.documents.retrieval import answer_citation_checker, document_system_message
from chat.errors import ChatError
from chat.knowledge.in_chat import NothingFound, with_knowledge
from chat.models import Conversation, Message
from chat.tools.calls import ToolCalls
from chat.tools.loop import tool_loop_for
from monitor.public import (
    LlamaError,
    LlamaHung,
    LlamaStreamBroken,
    LlamaUnavailable,
    LoadFailed,
    PromptCounter,
    QueueUnavailable,
    ServingPool,
    ServingSlot,
    serving_pool,
)

log = logging.getLogger(__name__)
Send = Callable[[dict], Awaitable[None]]
PROGRESS_INTERVAL_S = 0.25


class TurnRunner:
    """Runs one answer as an asyncio task; ``stop()`` cancels it and keeps the partial text."""

    served: ServingSlot | None = None  # the slot it got, for the usage ledger

    def __init__(
        self,
        *,
        conversation: Conversation,
        assistant_id: int,
        user_key: str,
        send: Send,
        options: dict | None = None,
        inputs: TurnInputs | BaseException | None = None,
    ):
        self.conversation = conversation
        self.conversation_key = str(conversation.id)
        self.assistant_id = assistant_id
        self.user_key = user_key
        self.send = send
        self.options = options or {}
        # Read with the turn's rows (one hop to the database thread), or what reading them raised;
        # None: the turn reads them itself. Either way they are read once.
        self.inputs = inputs
        self.content: list[str] = []
        self.citations: CitationStream | None = None  # set when the answer uses documents
        self.reasoning: list[str] = []
        self.resumes: list[dict] = []  # where the answer went on after its server failed (resume.py)
        self.stop_status = Message.Status.STOPPED
        self.stop_note = ""
        self.task: asyncio.Task | None = None
        self.tool_calls: ToolCalls | None = None  # a tool loop's step collects the model's calls here
        self._prepared = 0.0
        self._save_timer: asyncio.TimerHandle | None = None
        self._last_save = 0.0

    def start(self) -> asyncio.Task:
        self.task = asyncio.create_task(self.run())
        return self.task

    def stop(self, status: str = Message.Status.STOPPED, note: str = "") -> None:
        if self.task and not self.task.done():
            self.stop_status = status
            self.stop_note = note
            self.task.cancel()

    async def _emit(self, event: dict) -> None:
        event.setdefault("conversation", self.conversation_key)
        event.setdefault("message", self.assistant_id)
        try:
            await self.send(event)
        except Exception:  # the socket went away; the turn still finishes and is saved
            log.debug("could not deliver %s", event.get("type"), exc_info=True)

    async def run(self) -> None:
        started = time.monotonic()
        try:
            inputs = await self._inputs()
            pool = await serving_pool(inputs.profile, on_loading=self._on_loading)
            payload, notice = await self._prepare(inputs, pool)
            self._prepared = time.monotonic()
            if notice:
                await self._emit({"type": "notice", "text": notice})
            tools = await tool_loop_for(self, pool)
            stats = await (tools.run(payload, started) if tools else self._answer(pool, payload, started))
        except asyncio.CancelledError:
            await self._finish(self.stop_status, self.stop_note)
            raise
        except LlamaUnavailable:
            await self._finish(
                Message.Status.ERROR if not self.content else Message.Status.INCOMPLETE,
                _("The model server is not reachable right now. Your message is saved; send again once it is back."),
            )
        except LlamaStreamBroken as error:  # LlamaHung says it stopped responding
            await self._finish(
                Message.Status.INCOMPLETE,
                str(error)
                if isinstance(error, LlamaHung)
                else _("The model server stopped in the middle of the answer. The partial answer was kept."),
            )
        except ResumeRefused as error:
            await self._finish(Message.Status.INCOMPLETE, str(error))
        except LoadFailed as error:
            # The reason (paths, llama-server's log) is for admins: it is on the profile's page and timeline.
            log.warning("turn %s: profile did not load: %s", self.assistant_id, error)
            await self._finish(
                Message.Status.ERROR,
                _("The server profile for this chat could not be loaded. An admin can see why on its page."),
            )
        except QueueUnavailable:
            await self._finish(
                Message.Status.ERROR,
                _("The request queue is not reachable right now. Your message is saved; send again shortly."),
            )
        except NothingFound as nothing:  # collections asked, nothing relevant: said plainly, no model call
            await self._show(str(nothing))
            await self._finish(Message.Status.COMPLETE, "")
        except (LlamaError, ChatError) as error:
            await self._finish(Message.Status.ERROR, str(error))
        except Exception:
            log.exception("turn %s failed", self.assistant_id)
            await self._finish(Message.Status.ERROR, _("Something went wrong while answering."))
        else:
            await self._finish(Message.Status.COMPLETE, stats.pop("notice", ""), stats)  # the tool loop's

    async def _answer(self, pool: ServingPool, payload: dict, started: float) -> dict:
        """One request to the model in a serving slot, given back when its stream ends (a tool loop makes
        several, each a follow-up of the conversation in the fair queue)."""
        affinity = f"conversation:{self.conversation_key}"
        async with pool.slot(
            self.user_key, priority="person", on_position=self._on_queue_position, affinity=affinity
        ) as slot:
            log.debug(
                "turn %s: prepared in %.1f ms, queued %.1f ms, on %s",
                self.assistant_id,
                (self._prepared - started) * 1000,
                (time.monotonic() - self._prepared) * 1000,
                slot.node,
            )
            await self._emit({"type": "started"})
            self.served = slot  # the last step's, for the usage ledger
            try:
                stats = await self._stream(slot, payload, started)
            except LlamaStreamBroken as error:  # its slot told the pool; the answer goes on elsewhere
                cut = Cut(slot.node, error)
            else:
                cut = None
                await slot.remember(stats)
        if cut is not None:
            stats = await carry_on(self._so_far(started), pool, payload, cut, owner=self.user_key, affinity=affinity)
        return stats

    def _so_far(self, started: float) -> AnswerSoFar:
        return AnswerSoFar(
            content=lambda: "".join(self.content),
            reasoning=lambda: "".join(self.reasoning),
            emit=self._emit,
            stream=lambda slot, request: self._stream(slot, request, started),
            resumes=self.resumes,
        )

    async def _inputs(self) -> TurnInputs:
        """The history, profile and documents flag, read once (by the caller, or here)."""
        inputs, self.inputs = self.inputs, None  # the history (images too) is not kept for the whole answer
        if isinstance(inputs, BaseException):
            raise inputs
        if inputs is None:
            inputs = await database_sync_to_async(turn_inputs)(self.assistant_id, self.conversation, with_profile=True)
        return inputs

    async def _on_loading(self, name: str) -> None:
        await self._emit({"type": "notice", "text": _("Loading %(name)s…") % {"name": name}})

    async def _prepare(self, inputs: TurnInputs, pool: ServingPool) -> tuple[dict, str]:
        messages = build_messages(inputs.history)
        if not messages or messages[-1]["role"] != "user":
            raise ChatError(_("There is no question to answer."))
        info = pool.info
        if has_images(messages) and not info.vision:
            raise ChatError(
                _(
                    "The model serving this chat cannot read images (it has no vision projector). Remove the image, or ask an admin for a profile that takes images."
                )
            )
        if inputs.has_documents:
            messages = await self._with_documents(pool.client, messages, info.n_ctx)
        messages, self.citations = await with_knowledge(
            pool.client, self.conversation, self.assistant_id, messages, documents_budget(info.n_ctx), self.citations
        )
        messages = with_system_prompt(messages, self.conversation.system_prompt)
        fitted = await fit_messages(pool.client, messages, info.n_ctx, info.template_key)
        notice = ""
        if fitted.dropped:
            notice = ngettext(
                "%(count)d earlier message was left out so the conversation fits the model's context.",
                "%(count)d earlier messages were left out so the conversation fits the model's context.",
                fitted.dropped,
            ) % {"count": fitted.dropped}
        payload: dict = {
            "messages": fitted.messages,
            "max_tokens": min(self.options.get("max_tokens", fitted.max_tokens), fitted.max_tokens),
            "return_progress": True,
            "reasoning_format": "deepseek",
            "chat_template_kwargs": {"enable_thinking": self.conversation.thinking_enabled},
        }
        if not self.conversation.thinking_enabled:
            payload["reasoning_effort"] = "none"
        elif self.conversation.thinking_budget is not None:
            payload["thinking_budget_tokens"] = self.conversation.thinking_budget
        payload.update(sampling_fields(self.conversation.sampling_preset))
        for key in ("seed", "temperature"):
            if key in self.options:
                payload[key] = self.options[key]
        return payload, notice

    async def _with_documents(self, client: PromptCounter, messages: list[dict], n_ctx: int) -> list[dict]:
        """Questions in a conversation with documents get their summary and matching passages."""
        content = messages[-1]["content"]
        question = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
        system = await document_system_message(client, self.conversation.id, question, documents_budget(n_ctx))
        if system:
            checker = await answer_citation_checker(self.conversation.id)
            self.citations = CitationStream(checker) if checker else None
        return [{"role": "system", "content": system}, *messages] if system else messages

    async def _on_queue_position(self, position: int) -> None:
        await self._emit({"type": "queued", "position": position})

    async def _stream(self, slot: ServingSlot, payload: dict, started: float) -> dict:
        first_token_at = None
        self._last_progress = 0.0
        stats: dict = {}
        # A Stop can land while this task awaits a page or the database rather than the network: the
        # stream is closed there and then (not when the generator is collected), which is what frees
        # llama-server's slot at once.
        async with aclosing(slot.stream_chat(payload, pace_s=settings.CHAT_FRAME_S)) as batches:
            async for batch in batches:
                if await self._take(batch, stats) and first_token_at is None:
                    first_token_at = time.monotonic()
                self._maybe_save()
        if self.citations:
            await self._show(self.citations.finish(), checked=True)
        if first_token_at is not None:
            stats["ttft_ms"] = round((first_token_at - started) * 1000, 1)
        return stats

    async def _take(self, batch: list[dict], stats: dict) -> bool:
        """One network read's chunks: progress, reasoning and text go to the pages; True if any text came."""
        texts: list[str] = []
        thoughts: list[str] = []
        for chunk in batch:
            progress = chunk.get("prompt_progress")
            if progress:
                now = time.monotonic()
                done = progress.get("processed") == progress.get("total")
                if now - self._last_progress >= PROGRESS_INTERVAL_S or done:
                    self._last_progress = now
                    await self._emit(
                        {"type": "progress", "processed": progress.get("processed"), "total": progress.get("total")}
                    )
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                if delta.get("reasoning_content"):
                    thoughts.append(delta["reasoning_content"])
                if delta.get("content"):
                    texts.append(delta["content"])
                if delta.get("tool_calls") and self.tool_calls is not None:
                    self.tool_calls.feed(delta["tool_calls"])
            if chunk.get("timings"):
                stats.update(_stats(chunk["timings"], chunk.get("usage")))
        if thoughts:
            thought = "".join(thoughts)
            self.reasoning.append(thought)
            await self._emit({"type": "reasoning", "text": thought})
        if texts:
            await self._show("".join(texts))
        return bool(texts or thoughts)

    async def _show(self, text: str, *, checked: bool = False) -> None:
        """Text of the answer, its page citations checked first when it uses documents."""
        if self.citations and not checked:
            text = self.citations.feed(text)
        if text:
            self.content.append(text)
            await self._emit({"type": "token", "text": text})

    def _maybe_save(self) -> None:
        """Keep the stored partial answer at most CHAT_SAVE_INTERVAL_S behind what the pages show (a web
        process that dies keeps that much): a save is due that long after the last one, and takes the
        newest text when it runs, so text that came just after a save is saved when its time comes
        even if nothing more arrives."""
        if self._save_timer is not None:
            return  # the next save is scheduled: it takes the newest text when it runs
        wait = self._last_save + settings.CHAT_SAVE_INTERVAL_S - time.monotonic()
        if wait > 0:
            self._save_timer = asyncio.get_running_loop().call_later(wait, self._save)
        else:
            self._save()

    def _save(self) -> None:
        self._save_timer = None
        self._last_save = time.monotonic()
        progress.writer.put(self.assistant_id, "".join(self.content), "".join(self.reasoning))

    async def _finish(self, status: str, error: str, stats: dict | None = None) -> None:
        if self._save_timer is not None:  # a save still waiting for its time: the final write replaces it
            self._save_timer.cancel()
            self._save_timer = None
        if self.citations:  # stopped half-way: what was held back is checked and kept too
            self.content.append(self.citations.finish())
        content, reasoning = "".join(self.content), "".join(self.reasoning)
        if self.resumes:
            stats = {**(stats or {}), "resumed": self.resumes}
        await asyncio.shield(
            database_sync_to_async(_final_write)(
                self.assistant_id,
                content=content,
                reasoning=reasoning,
                status=status,
                error=error,
                stats=stats,
                owner_id=self.conversation.owner_id,
                served=self.served,
            )
        )
        await self._emit({"type": "done", "status": status, "error": error, "stats": stats or {}})


def _final_write(message_id: int, **fields) -> None:
    """The answer's outcome, written after any save of its text so far (none lands after it)."""
    progress.writer.settle(message_id)
    finish_message(message_id, **fields)


def _stats(timings: dict, usage: dict | None) -> dict:
    return {
        "prompt_tokens": timings.get("prompt_n", (usage or {}).get("prompt_tokens")),
        "cached_tokens": timings.get("cache_n"),
        "output_tokens": timings.get("predicted_n", (usage or {}).get("completion_tokens")),
        "prompt_per_second": round(timings.get("prompt_per_second") or 0, 1),
        "tokens_per_second": round(timings.get("predicted_per_second") or 0, 1),
        "model_ms": round((timings.get("prompt_ms") or 0) + (timings.get("predicted_ms") or 0), 1),
    }
