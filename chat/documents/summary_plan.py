"""Planning a summary: what one call may take (sized with llama-server's own token counts),
and the document's pages packed into chunks that fit."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from django.conf import settings

from monitor.public import PromptCounter, ServingPool

COUNT_CONCURRENCY = 8
SAFETY = 0.97  # per-piece counts summed may differ a little from the joined text's count


@dataclass(frozen=True)
class Budget:
    slots: int
    answer_tokens: int
    input_tokens: int  # what one chunk's text may take


async def plan_budget(pool: ServingPool, system: str) -> Budget:
    """What one call may take on the pool's nodes; as many calls at once as the pool has slots."""
    info, client = pool.info, pool.client
    # At most a sixth of the context, so several summaries always fit one combining call.
    answer = max(64, min(settings.DOCUMENT_SUMMARY_TOKENS, info.n_ctx // 6))
    empty = await client.apply_template(
        [{"role": "system", "content": system}, {"role": "user", "content": "Part 999 of 999, pp. 9999-9999:\n\n"}]
    )
    overhead = await client.count_tokens(empty) + 16
    room = int((info.n_ctx - answer - overhead) * SAFETY)
    if settings.DOCUMENT_CHUNK_TOKENS:  # smaller chunks: more, shorter calls and a more detailed summary
        # Never under three answers: combining calls must take several summaries each.
        room = min(room, max(settings.DOCUMENT_CHUNK_TOKENS, 3 * answer))
    return Budget(max(1, pool.slots), answer, room)


async def count_all(client: PromptCounter, texts: list[str]) -> list[int]:
    gate = asyncio.Semaphore(COUNT_CONCURRENCY)

    async def one(text: str) -> int:
        async with gate:
            return await client.count_tokens(text)

    return list(await asyncio.gather(*(one(text) for text in texts)))


@dataclass
class Piece:
    """Named as the fields of its ``DocumentChunk`` row, which ``services.save_summary_plan`` fills from it."""

    first_page: int
    last_page: int
    text: str
    tokens: int


async def _split_piece(client: PromptCounter, piece: Piece, limit: int) -> list[Piece]:
    """A page longer than one chunk: cut it at line breaks into parts that fit."""
    parts = max(2, -(-piece.tokens // limit))
    lines = piece.text.split("\n")
    size = -(-len(piece.text) // parts)
    texts: list[str] = []
    current = ""
    for line in lines:
        while len(line) > size:
            texts.append(current + line[:size]) if current else texts.append(line[:size])
            current, line = "", line[size:]
        if current and len(current) + len(line) > size:
            texts.append(current)
            current = ""
        current += line + "\n"
    if current.strip():
        texts.append(current)
    marked = [texts[0]] + [f"[p. {piece.first_page}]\n{text}" for text in texts[1:]]
    counts = await count_all(client, marked)
    result: list[Piece] = []
    for text, tokens in zip(marked, counts, strict=True):
        part = Piece(piece.first_page, piece.last_page, text, tokens)
        result.extend(await _split_piece(client, part, limit) if tokens > limit else [part])
    return result


async def pack(client: PromptCounter, pieces: list[Piece], limit: int) -> list[Piece]:
    """Consecutive pieces joined greedily into chunks of at most ``limit`` tokens."""
    chunks: list[Piece] = []
    for piece in pieces:
        for part in await _split_piece(client, piece, limit) if piece.tokens > limit else [piece]:
            if chunks and chunks[-1].tokens + part.tokens + 1 <= limit:
                last = chunks[-1]
                chunks[-1] = Piece(
                    last.first_page, part.last_page, f"{last.text}\n\n{part.text}", last.tokens + part.tokens + 1
                )
            else:
                chunks.append(part)
    return chunks
