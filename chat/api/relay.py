"""The relay: an admitted call takes the key's place and its owner's turn in the fair queue (in line with
their chats), is sent to the node the queue gives, and llama-server's answer goes back as it came, its
usage counted once. Streams are relayed as llama-server's own SSE bytes, never decoded per token: a
``StreamTally`` only looks for the end and the last event with figures.

A failed request's node is reported by its serving slot; here the error only becomes the API's answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager

import orjson
from django.conf import settings

from chat.api import keys
from chat.api.admission import key_place
from chat.api.calls import ApiCall
from chat.api.errors import broken, from_llama, queue_unavailable
from chat.api.keys import CallerKey
from chat.api.tally import StreamTally, drop_cache_figures, timings_of, usage_of
from chat.usage.entries import api_entry
from monitor.public import LlamaError, QueueUnavailable, ServingSlot


@asynccontextmanager
async def _turn(call: ApiCall, key: CallerKey) -> AsyncIterator[ServingSlot]:
    """The key's place, then the owner's serving slot, in line with their chats."""
    continues, makes = call.affinity()
    async with key_place(key):
        try:
            slot = call.pool.slot(str(key.owner_id), priority="person", affinity=continues, remember_as=makes)
            async with slot as serving:
                yield serving
        except QueueUnavailable as error:
            raise queue_unavailable() from error


async def complete(call: ApiCall, key: CallerKey) -> bytes:
    """A plain answer: llama-server's JSON body, relayed as is (less its cache figures)."""
    async with _turn(call, key) as slot:
        usage, figures = (0, 0), {}
        try:
            content = await slot.post_raw(call.path, call.body)
            content, usage, figures = _read_answer(call, content)
        except LlamaError as error:
            raise from_llama(error) from error
        finally:
            await asyncio.shield(keys.record_usage(key, *usage, api_entry(key, call.endpoint, slot, usage, figures)))
        await slot.remember(figures)
    return content


def _read_answer(call: ApiCall, content: bytes) -> tuple[bytes, tuple[int, int], dict]:
    """(the body to relay, its usage, its figures); a body that is not an answer is relayed as it came."""
    try:
        answer = orjson.loads(content)
        usage, figures = usage_of(answer), timings_of(answer)
        call.finish(answer)
        if drop_cache_figures(answer) or call.returns_documents:
            content = orjson.dumps(answer)
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
        return content, (0, 0), {}
    return content, usage, figures


async def stream(call: ApiCall, key: CallerKey) -> AsyncIterator[bytes | None]:
    """A streamed answer. Yields ``None`` first, once llama-server has begun answering (anything that
    fails before that raises ApiError, for a plain error response), then its SSE bytes as they come. A
    failure after that ends the stream with an OpenAI-shaped error event.

    Closing the iteration early (the client went away) closes the upstream request, which frees
    llama-server's slot, and gives back the serving slot and the key's place."""
    tally = StreamTally()
    async with _turn(call, key) as slot:
        upstream = slot.stream_raw(call.path, call.body, pace_s=settings.API_FRAME_S)
        try:
            async with aclosing(_relayed(upstream, tally)) as relayed:
                async for data in relayed:
                    yield data
        finally:
            used = tally.usage()
            await asyncio.shield(
                keys.record_usage(
                    key, *used, api_entry(key, call.endpoint, slot, used, tally.timings(), tally.finished)
                )
            )
        if tally.finished:
            await slot.remember(tally.timings())
    if tally.end:
        yield tally.end  # [DONE], once the usage is counted and the slot given back


async def _relayed(upstream: AsyncIterator[bytes], tally: StreamTally) -> AsyncIterator[bytes | None]:
    begun = False
    try:
        async with aclosing(upstream):
            async for data in upstream:
                if not begun:
                    begun = True
                    yield None
                if relayed := tally.feed(data):
                    yield relayed
    except LlamaError as error:
        if not begun:
            raise from_llama(error) from error
        yield from_llama(error).sse_event()  # a half event is dropped: it cannot be read
        return
    if not begun:
        raise broken()
    if tail := tally.close():
        yield tail
    if not tally.finished:
        yield broken().sse_event()
