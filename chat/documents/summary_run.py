"""The run that writes a whole document's summary: map-reduce over every page, sized with
llama-server's own token counts.

Level 0 chunks pack consecutive pages (each marked ``[p. N]``) up to what one slot's
context holds after the prompt and the answer; each is summarized on its own, up to
the profile's slots at once, each in the chat's fair queue as background work: a
person's turn always goes first, one slot stays free for people, and documents take
turns by owner.
Level N combines level N-1 summaries, recursively while they do not fit one call.
Every chunk is a row, saved the moment its summary is written: a killed worker's
successor plans nothing again and pays only for the chunks not done (the rows: ``selectors``
and ``services``; the text the person reads: ``final_summary``; the worker's side: ``pipeline``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from asgiref.sync import sync_to_async
from django.utils.translation import gettext as _

from chat.documents.citations import check_citations, pages_of_marked_text
from chat.documents.final_summary import compose
from chat.documents.heartbeats import HeartbeatAndCancelCheck, claim
from chat.documents.languages import language_name
from chat.documents.model_calls import completion_text
from chat.documents.sandbox import Cancelled
from chat.documents.selectors import document_and_profile, page_texts_between, summary_chunks, text_pages
from chat.documents.services import finish_summary, mark_chunk_done, mark_chunk_started, save_summary_plan, stop_summary
from chat.documents.summary_plan import Budget, Piece, count_all, pack, plan_budget
from chat.documents.summary_review import MAP_SYSTEM, REDUCE_SYSTEM, RETRY_SYSTEM, Review, review
from chat.models import Document, DocumentChunk
from monitor.public import (
    LlamaError,
    LlamaStreamBroken,
    LlamaUnavailable,
    LoadFailed,
    QueueUnavailable,
    ServerProfile,
    ServingPool,
    await_while_alive,
    serving_pool,
)

log = logging.getLogger(__name__)

CANCEL_POLL_S = 0.5  # how often a cancel is looked for: it takes effect within a second
# llama-server comes back seconds after it is killed (supervised, the profile reloaded): a part cut
# off is asked again after each of these pauses before the summary stops and says why.
SERVER_RESTART_WAITS_S = (2.0, 4.0, 8.0, 15.0)


class SummaryRun:
    """One document's summary: its parts planned, each asked of the model in the fair queue, then combined."""

    def __init__(self, document_id, *, claimed: bool = False):
        self.document_id = document_id
        self.claimed = claimed
        self.pool: ServingPool | None = None
        self.language = "English"
        self.budget: Budget | None = None
        self.profile: ServerProfile | None = None
        self.owner_id = None

    async def run(self) -> str:
        """The document's final status."""
        document, profile = await sync_to_async(document_and_profile)(self.document_id)
        self.owner_id = document.owner_id
        if document.status != Document.Status.SUMMARIZING:
            return document.status
        if not self.claimed and not await sync_to_async(claim)(self.document_id):
            log.info("document %s: another run is summarizing it", self.document_id)
            return document.status
        try:
            self.pool = await serving_pool(profile)  # loads the profile if no node serves it
            self.profile = self.pool.profile
        except LoadFailed:
            message = _("The summary could not start: the server profile did not load. An admin sees why on its page.")
            return await self._stop(Document.Status.FAILED, message)
        except LlamaError as error:
            return await self._stop(
                Document.Status.FAILED, _("The summary could not start: %(reason)s") % {"reason": error}
            )
        try:
            alive = sync_to_async(HeartbeatAndCancelCheck(self.document_id))
            summary = await await_while_alive(self._summarize(document), alive, CANCEL_POLL_S, Cancelled)
        except Cancelled:
            return await self._stop(Document.Status.CANCELLED)
        except (LlamaError, QueueUnavailable) as error:
            message = _("The summary stopped: %(reason)s The parts already done are kept; try again to continue.")
            return await self._stop(Document.Status.FAILED, message % {"reason": error})
        await sync_to_async(finish_summary)(self.document_id, summary)
        return Document.Status.READY

    async def _stop(self, status: str, message: str = "") -> str:
        await sync_to_async(stop_summary)(self.document_id, status, message)
        return status

    async def _summarize(self, document: Document) -> str:
        """Level 0 summarizes the pages, each level above the summaries below it, until one is left."""
        pages = await sync_to_async(text_pages)(document.id)
        self.language = language_name(document, "\n".join(text for _number, text in pages[:20]))
        self.budget = await plan_budget(self.pool, MAP_SYSTEM.format(language=self.language))
        pieces = [(number, number, f"[p. {number}]\n{text}") for number, text in pages]
        level, level0 = 0, []
        while True:
            planned = await sync_to_async(summary_chunks)(document.id, level)
            if not planned:
                planned = await self._plan(document.id, level, pieces)
            await self._run_level(planned, total=len(planned))
            done = await sync_to_async(summary_chunks)(document.id, level)
            level0 = level0 or done
            if len(done) == 1:
                return compose(done[0], level0)
            pieces = [(c.first_page, c.last_page, f"({c.pages_label})\n{c.summary.strip()}") for c in done]
            level += 1

    async def _plan(self, document_id, level: int, pieces: list[tuple[int, int, str]]) -> list[DocumentChunk]:
        """A level's chunks: its pieces (first page, last page, text) counted and packed, the plan stored."""
        counts = await count_all(self.pool.client, [text for _first, _last, text in pieces])
        counted = [Piece(first, last, text, tokens) for (first, last, text), tokens in zip(pieces, counts, strict=True)]
        chunks = await pack(self.pool.client, counted, self.budget.input_tokens)
        return await sync_to_async(save_summary_plan)(document_id, level, chunks)

    async def _run_level(self, chunks: list[DocumentChunk], total: int) -> None:
        gate = asyncio.Semaphore(self.budget.slots)
        pending = [chunk for chunk in chunks if not chunk.done]

        async def one(chunk: DocumentChunk) -> None:
            async with gate:
                result = await self._reviewed_summary(chunk, total)
                await sync_to_async(mark_chunk_done)(chunk.id, result.text, result.note)

        await asyncio.gather(*(one(chunk) for chunk in pending))

    async def _reviewed_summary(self, chunk: DocumentChunk, total: int) -> Review:
        """A part's summary without echoed instructions and with only citations to its own pages;
        asked once more in other words when it is mostly a copy, then kept with a note."""
        result = await self._summarize_chunk(chunk, total, retry=False)
        if result.note:
            log.info("document %s: part %s was a copy (%s); asked again", self.document_id, chunk.id, result.note)
            result = await self._summarize_chunk(chunk, total, retry=True)
        if chunk.level == 0:
            page_texts = pages_of_marked_text(chunk.text)
        else:
            page_texts = await sync_to_async(page_texts_between)(self.document_id, chunk.first_page, chunk.last_page)
        # CPU work over a part's pages (the whole document for the last step): off the event loop.
        text = await asyncio.to_thread(
            check_citations,
            result.text,
            range(chunk.first_page, chunk.last_page + 1),
            page_texts,
            chunk.document.kind in Document.SECTIONED,
        )
        if not text.strip():
            text = _("(nothing to summarize in %(pages)s)") % {"pages": chunk.pages_label}
        return Review(text, result.note)

    async def _summarize_chunk(self, chunk: DocumentChunk, total: int, *, retry: bool) -> Review:
        for pause in SERVER_RESTART_WAITS_S:
            try:
                return await self._ask_for_summary(chunk, total, retry)
            except (LlamaUnavailable, LlamaStreamBroken):
                log.info("document %s: llama-server went away; part %s asked again", self.document_id, chunk.id)
                await asyncio.sleep(pause)
                # The profile's pool again (loaded anew if it must be); not back yet: the next attempt says so.
                with contextlib.suppress(LlamaError):
                    self.pool = await serving_pool(self.profile)
        return await self._ask_for_summary(chunk, total, retry)

    async def _ask_for_summary(self, chunk: DocumentChunk, total: int, retry: bool) -> Review:
        if chunk.level == 0:
            prompt = MAP_SYSTEM
            header = f"Part {chunk.index + 1} of {total}, {chunk.pages_label}:"
        else:
            prompt = REDUCE_SYSTEM
            header = f"Summaries of parts, {chunk.pages_label}:"
        system = (RETRY_SYSTEM if retry else prompt).format(language=self.language)
        user = f"{header}\n\n{chunk.text}"
        payload = {
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": self.budget.answer_tokens,
            "temperature": 0.3,
        }
        # Background work: people go first, and documents take turns by owner, not one turn each.
        async with self.pool.slot(f"owner:{self.owner_id}", priority="background") as slot:
            await sync_to_async(mark_chunk_started)(chunk.id)
            text = await completion_text(slot, payload)
        # Every prompt this part has been given is the instructions whose echo is taken out.
        instructions = "\n".join((prompt, RETRY_SYSTEM, header))
        # Combining summaries may keep their sentences; only a part of the document itself must not be copied.
        source = chunk.text if chunk.level == 0 else ""
        return review(text.strip(), instructions.format(language=self.language), source)
