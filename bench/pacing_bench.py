"""The frame clock of a streamed answer (monitor/llama/wire.py) on a real clock, against the fake
upstream of tests/support/fake_upstream.py (no stack needed).

The unit tests (tests/unit/test_wire_stream.py) prove the order of things with an hour-long frame;
what that order is worth in time is printed here, medians of several runs:
- ``pacing_first_token_ms=``: from the first token's write to its hand-off, 200 ms frames (goal: far
  below a frame: the first token is never held);
- ``pacing_reads_per_21_tokens=``: reads of 21 tokens written 5 ms apart, 200 ms frames (goal: a few,
  not 21);
- ``pacing_end_wake_ms=``: from the answer's end (written, then the connection closed) to its
  hand-off, 3 s frames (goal: far below the frame);
- ``pacing_cut_wake_ms=``: from a cut mid-frame (the connection aborted) to the stream ending
  broken, 3 s frames (goal: likewise).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from monitor.llama.errors import LlamaStreamBroken  # noqa: E402
from tests.support import stack  # noqa: E402
from tests.support.fake_upstream import HEAD, LAST_CHUNK, chunk, event, serve  # noqa: E402

RUNS = 5
FRAME_S = 0.2
LONG_FRAME_S = 3.0
PATH = "/v1/chat/completions"


async def first_token_and_reads() -> tuple[float, int]:
    """(ms from the first token's write to its hand-off, reads of the 21 tokens) at 200 ms frames."""
    written: dict[str, float] = {}

    async def steady(writer):
        writer.write(HEAD)
        await writer.drain()
        await asyncio.sleep(0.05)
        for n in range(21):
            written.setdefault("first", time.perf_counter())
            writer.write(chunk(event(f" {n}")))
            await writer.drain()
            await asyncio.sleep(0.005)
        writer.write(LAST_CHUNK)

    client, server, _seen = await serve(steady, timeout_s=30)
    reads: list[float] = []
    try:
        async for _data in client.stream_raw(PATH, {"messages": []}, pace_s=FRAME_S):
            reads.append(time.perf_counter())
    finally:
        server.close()
    return (reads[0] - written["first"]) * 1000, len(reads)


async def end_wake(cut: bool) -> float:
    """ms from the end (or a cut) to its hand-off (or the stream ending broken), 3 s frames."""
    ended: dict[str, float] = {}

    async def short_answer(writer):
        writer.write(HEAD + chunk(event("first")))
        await writer.drain()
        await asyncio.sleep(0.05)  # the frame sleeps from the first token's hand-off
        if cut:
            ended["at"] = time.perf_counter()
            writer.transport.abort()
            return
        writer.write(chunk(event(" last")) + LAST_CHUNK)
        await writer.drain()
        ended["at"] = time.perf_counter()  # closed as the handler returns

    client, server, _seen = await serve(short_answer, timeout_s=30)
    try:
        async for _data in client.stream_raw(PATH, {"messages": []}, pace_s=LONG_FRAME_S):
            pass
    except LlamaStreamBroken:
        pass
    finally:
        server.close()
    return (time.perf_counter() - ended["at"]) * 1000


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-pacing-")  # the errors' messages are translated
    firsts, reads, ends, cuts = [], [], [], []
    try:
        for _ in range(RUNS):
            first_ms, read_count = asyncio.run(first_token_and_reads())
            firsts.append(first_ms)
            reads.append(read_count)
            ends.append(asyncio.run(end_wake(cut=False)))
            cuts.append(asyncio.run(end_wake(cut=True)))
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    for name, values, digits in (
        ("pacing_first_token_ms", firsts, 2),
        ("pacing_reads_per_21_tokens", reads, 0),
        ("pacing_end_wake_ms", ends, 2),
        ("pacing_cut_wake_ms", cuts, 2),
    ):
        values = sorted(values)
        print(f"{name}={statistics.median(values):.{digits}f}", flush=True)
        print(f"{name}_spread={values[0]:.{digits}f}-{values[-1]:.{digits}f} ({RUNS} runs)", flush=True)


if __name__ == "__main__":
    main()
