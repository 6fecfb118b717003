"""A person's time to first token while a long document is summarized, against the same idle.

For ``--parallel 1`` and ``--parallel 2`` in turn (a fresh stack each: Redis, llama-server,
Daphne, the Celery worker): a person's chat TTFT with nothing else running, then while a
many-part summary runs, one message after another. For each message sent during the
summary, the running chunk's remaining time is read back afterwards (the first
``finished_at`` of the chunks in progress when it was sent).

Prints, per setting N: ``chat_ttft_idle_pN_ms=``, ``chat_ttft_during_summary_pN_ms=`` (medians),
``chunk_remaining_pN_ms=`` (median remaining time of the running chunk when a message was
sent), ``queue_wait_pN_ms=`` (how long those messages waited in the fair queue, from its
grant log) and ``summary_chunk_pN_ms=`` (a part's median time), then the plain
``chat_ttft_during_summary_ms=`` and ``chat_ttft_idle_ms=`` (those of --parallel 1).
Targets: on --parallel 1, TTFT during a summary at most the running chunk's remaining
time plus 10% (on top of the idle TTFT, the person's own prompt); on --parallel 2, within
1.5x idle. ``people_first_p1=`` and ``people_first_p2=`` say whether each target was met.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

IDLE_RUNS = 5
DURING_RUNS = 6
OPTIONS = {"seed": 7, "max_tokens": 16, "temperature": 0.7}


def ttft_ms(ws, text: str) -> float:
    from tests.support.client import send

    started = time.perf_counter()
    send(ws, type="send", text=text, options=OPTIONS)
    first = None
    while True:
        event = json.loads(ws.recv(timeout=300))
        if event["type"] == "token" and first is None:
            first = time.perf_counter()
        elif event["type"] in ("done", "error"):
            assert event.get("status") == "complete", event
            return ((first or time.perf_counter()) - started) * 1000


def running_chunks(document_id) -> list[int]:
    from chat.models import DocumentChunk

    return list(DocumentChunk.objects.filter(document_id=document_id, requests__gt=0, done=False).values_list("id"))


def queue_waits(user_key: str, sent_at: list[float]) -> list[float]:
    """How long each message sent during the summary waited for its slot, from the queue's grant log."""
    import asyncio

    from monitor.profiles.selectors import find_profile
    from monitor.redis_clients import close_loop_clients
    from monitor.serving.queue import FairQueue
    from tests.support import queue_state

    name = find_profile(None).name

    async def grants():
        queue = FairQueue(name)
        try:
            return [
                g.at_ms / 1000 for g in await queue_state.grants(queue) if g.user == user_key and g.priority == "person"
            ]
        finally:
            await close_loop_clients()

    granted = asyncio.run(grants())
    return [(min(t for t in granted if t >= sent - 0.05) - sent) * 1000 for sent in sent_at]


def measure(parallel: int, batch_size: int | None = None) -> dict:
    os.environ["QWENWEB_DOCUMENT_SUMMARY_TOKENS"] = "96"
    os.environ["QWENWEB_DOCUMENT_CHUNK_TOKENS"] = "1200"
    from tests.support import pdfs, stack

    run_dir = stack.django_run_dir(f"qwenweb-contention-p{parallel}-", parallel=parallel)
    from monitor.profiles.selectors import find_profile
    from monitor.profiles.services import save_profile

    # The default profile with 1 or 2 slots of 4096 tokens each; llama-server starts with it.
    profile = find_profile(None)
    profile.parallel, profile.ctx_size = parallel, 4096 * parallel
    if batch_size:  # how much prompt llama-server takes in one step: what a person's prompt waits behind
        profile.batch_size = profile.ubatch_size = batch_size
    save_profile(profile)
    profile.placements.update(live_revision=None, live_options=[])  # nothing served yet: it starts with these
    services = [stack.start_redis(run_dir)]
    services += [stack.start_llama(run_dir), stack.start_web(run_dir), stack.start_worker(run_dir)]
    try:
        from chat.models import Document, DocumentChunk
        from tests.support.client import chat_socket, login, make_user, upload_document

        person = make_user()
        http = login(person)
        with chat_socket(http) as ws:
            ttft_ms(ws, "Warm up.")
            idle = [ttft_ms(ws, f"Name a colour ({run}).") for run in range(IDLE_RUNS)]
            reader = login(make_user())
            body = upload_document(reader, "report.pdf", pdfs.report_pdf(90, words_per_page=60), language="en").json()
            document_id = body["document"]["id"]
            stack.wait_until(lambda: running_chunks(document_id), 300, "the summary's first part")
            during: list[tuple[float, float, list[int]]] = []
            for run in range(DURING_RUNS):
                running = running_chunks(document_id)
                if not running or Document.objects.get(id=document_id).status != "summarizing":
                    break
                sent = time.time()
                during.append((ttft_ms(ws, f"Name a city ({run})."), sent, running))
                time.sleep(0.7 + 0.4 * run)  # land at other points of the parts
        stack.wait_until(lambda: Document.objects.get(id=document_id).status not in Document.ACTIVE, 900, "the summary")
        finished = dict(DocumentChunk.objects.filter(document_id=document_id).values_list("id", "finished_at"))
        remaining = [
            max(0.0, min(finished[chunk].timestamp() for (chunk,) in running) - sent) * 1000
            for _ttft, sent, running in during
        ]
        ends = sorted(t.timestamp() for t in finished.values() if t)
        return {
            "idle": statistics.median(idle),
            "during": statistics.median(t for t, _sent, _running in during),
            "remaining": statistics.median(remaining),
            "chunk": statistics.median(b - a for a, b in zip(ends, ends[1:], strict=False)) * 1000,
            "met": all(
                t <= 1.1 * left + statistics.median(idle) for (t, _s, _r), left in zip(during, remaining, strict=True)
            )
            if parallel == 1
            else statistics.median(t for t, _s, _r in during) <= 1.5 * statistics.median(idle),
            "queue_wait": statistics.median(queue_waits(str(person.pk), [sent for _t, sent, _r in during])),
            "samples": len(during),
        }
    finally:
        for service in reversed(services):
            service.stop()


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "--parallel":
        # One setting only; a fourth argument sets the default profile's --batch-size (an experiment).
        print(json.dumps(measure(int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else None)))
        return
    figures = {}
    for parallel in (1, 2):
        result = subprocess.run(
            [sys.executable, __file__, "--parallel", str(parallel)], stdout=subprocess.PIPE, text=True, check=True
        )
        figures[parallel] = json.loads(result.stdout.strip().splitlines()[-1])
    for parallel, f in figures.items():
        print(
            f"chat_ttft_idle_p{parallel}_ms={f['idle']:.0f} chat_ttft_during_summary_p{parallel}_ms={f['during']:.0f} "
            f"chunk_remaining_p{parallel}_ms={f['remaining']:.0f} summary_chunk_p{parallel}_ms={f['chunk']:.0f} "
            f"queue_wait_p{parallel}_ms={f['queue_wait']:.0f} samples_p{parallel}={f['samples']} people_first_p{parallel}={'yes' if f['met'] else 'no'}"
        )
    print(f"chat_ttft_during_summary_ms={figures[1]['during']:.0f} chat_ttft_idle_ms={figures[1]['idle']:.0f}")


if __name__ == "__main__":
    main()
