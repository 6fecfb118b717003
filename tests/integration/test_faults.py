"""Each part of the product killed for real while a person streams an answer and a document is summarized.

The whole product runs under `make run`'s generated supervisord configuration in a private
folder (its own database, Redis, llama-server, ports). For each part in turn (web, worker,
beat, sampler, Redis, the llama-server router, the llama-server supervisor): a long answer is streaming (its first token seen) and a document is being
summarized; the part is SIGKILLed; supervisord starts it again under a new pid and the
timeline says so; the person's page learns what became of the answer (for the web server:
the reconnected socket's stored state names the interruption); a new question is answered;
every message the person sent is stored exactly once with exactly one answer, none left
'streaming'. Last, every document reaches 'ready' without redoing a part done before a kill.
A stopped (SIGSTOP) web server caught by the health check: tests/integration/test_health.py.

Run alone: ``pytest -m faults``.
"""

from __future__ import annotations

import os
import time

import httpx
import psutil
import pytest
from django.conf import settings
from websockets.exceptions import ConnectionClosed

from tests.support import pdfs
from tests.support.client import base_url, send, talking_to, upload_document
from tests.support.faults import FINISHED, LONG_PROMPT, Person, lost_or_doubled, make_person, still_streaming
from tests.support.hold import pids_paused
from tests.support.stack import wait_until
from tests.support.supervised import PARTS, Supervised, query, supervised_env

pytestmark = pytest.mark.faults

INTERRUPTED = "This answer was interrupted when the server restarted. The partial answer was kept."
RESTART_BOUND_S = 90  # supervisord's 3 s startsecs, a web server's start, a profile's reload on a loaded box
documents: list[dict] = []
done_at_kill: dict[str, dict] = {}


@pytest.fixture(scope="module")
def product(tmp_path_factory):
    var_dir = tmp_path_factory.mktemp("faults")
    env = supervised_env(var_dir, os.environ, fresh_ports=True)
    # A stalled summary is taken up again by beat (every 30 s) once its heartbeat is 10 s old.
    env["QWENWEB_DOCUMENT_STALL_S"] = "10"
    stack = Supervised(var_dir, env)
    stack.manage("migrate", "-v", "0")
    with talking_to(env["QWENWEB_PORT"]):  # tests.support.client talks to this run
        stack.start()
        try:
            healthy = lambda: httpx.get(base_url() + "/healthz", timeout=5).status_code == 200  # noqa: E731
            wait_until(healthy, 300, "every supervised part healthy", stack.process, var_dir / "supervisord.out")
            yield stack
        finally:
            stack.shutdown()


@pytest.fixture(scope="module")
def person(product):
    someone = Person(make_person(product, "faults-person"))
    someone.connect()
    return someone


def document_state(person: Person, document: dict) -> dict:
    return person.http.get(document["urls"]["status"]).json()["document"]


def a_document_summarizing(person: Person) -> None:
    """A document being summarized right now: one already is, or a new one is uploaded."""
    if any(document_state(person, d)["status"] == "summarizing" for d in documents):
        return
    response = upload_document(person.http, f"report-{len(documents)}.pdf", pdfs.report_pdf(8, words_per_page=60))
    assert response.status_code == 201, response.text
    documents.append(response.json()["document"])
    wait_until(lambda: document_state(person, documents[-1])["status"] == "summarizing", 120, "summarizing")


def chunks_done(product: Supervised, document_id: str) -> dict[int, tuple]:
    sql = "SELECT id, requests, finished_at FROM chat_documentchunk WHERE document_id = ? AND done"
    return {row[0]: row[1:] for row in query(product.var_dir, sql, (document_id.replace("-", ""),))}


def restarted_on_timeline(product: Supervised, part: str) -> bool:
    kinds = [kind for kind, details in product.timeline() if part == "llama-server" or f'"{part}"' in details]
    if part == "llama-server":  # the llama supervisor restarts its router itself
        return "server_restarted" in kinds
    return "process_exited" in kinds and "process_restarted" in kinds


@pytest.mark.parametrize("part", PARTS)
def test_part_killed_while_answering_and_summarizing(product, person, part):
    a_document_summarizing(person)
    if not any(done_at_kill.values()):
        # The last check needs a part done before some kill: the first kill waits for one
        # (no answer is streaming yet, so the summary has a slot), not the model's pace.
        part_done = lambda: any(chunks_done(product, d["id"]) for d in documents)  # noqa: E731
        wait_until(part_done, 180, "a document's first part summarized")
        a_document_summarizing(person)
    answer = person.start_long_answer(settings.CHAT_MAX_ANSWER_TOKENS)
    killed = product.kill(part)
    for document in documents:
        done_at_kill.setdefault(document["id"], {}).update(chunks_done(product, document["id"]))

    wait_until(lambda: product.pid_of(part) not in (0, killed), RESTART_BOUND_S, f"{part} restarted")
    wait_until(lambda: restarted_on_timeline(product, part), 30, f"{part}'s restart on the timeline")
    closed = part == "web"
    if not closed:
        try:
            send(person.ws, type="stop", conversation=person.conversation)
            assert person.until_done(answer)["status"] in FINISHED
        except ConnectionClosed:  # Redis: the socket's channel layer went with it; Channels closes it (1011)
            closed = True
    if closed:
        # The page reconnects and asks for the stored messages (static/chat/chat.js).
        wait_until(lambda: not still_streaming(product.var_dir), 30, "no answer left streaming")
        person.connect()
        shown = person.history()[answer]
        assert shown["status"] in FINISHED - {"complete"} and shown["error"], shown
        if part == "web":
            assert (shown["status"], shown["error"]) == ("incomplete", INTERRUPTED)

    # Chat works again: a short question is answered (one asked while a part is still coming
    # back may be refused with a reason, as a person would see; they ask again).
    deadline = time.monotonic() + 240
    while person.until_done(person.ask(f"Say hi ({part}, {len(person.sent)}).", 8), 240)["status"] != "complete":
        assert time.monotonic() < deadline, f"chat does not answer after {part} was killed"
        time.sleep(1)

    wait_until(lambda: not still_streaming(product.var_dir), 30, "no answer left streaming")
    assert lost_or_doubled(person, product.var_dir) == 0
    assert {row[3] for row in person.stored(product.var_dir)} <= FINISHED


def test_every_document_summarized_after_the_faults(product, person):
    assert documents and any(done_at_kill.values()), "no document had a part done at a kill"
    for document in documents:
        wait_until(lambda d=document: document_state(person, d)["status"] in ("ready", "failed"), 300, "summary")
        state = document_state(person, document)
        assert state["status"] == "ready", state
        after = chunks_done(product, document["id"])
        for chunk_id, kept in done_at_kill[document["id"]].items():
            assert after[chunk_id] == kept, "a part done before a kill was summarized again"


def test_answers_streaming_through_a_redis_restart_complete_and_are_stored_once(product, person):
    """Redis killed while a chat answer and an API answer stream: neither depends on Redis between its
    first and last token; both complete, the chat answer is stored once, the API call ends with [DONE]."""
    from tests.support.faults import StreamedApiAnswer

    key = product.manage("shell", "-c", CREATE_KEY.format(person.user.username)).split()[-1]
    answer = person.start_long_answer(256)
    body = {"model": "chat-8k", "messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 256}
    call = StreamedApiAnswer(base_url(), key, body)
    assert call.first_bytes.wait(300) and not call.error, call.error
    killed = product.kill("redis")
    # Both streams silent while Redis is away or just back, empty (their model instances paused, as a loaded
    # box pauses between tokens): the look at a silent stream's node learns nothing from such a Redis, and
    # neither answer is released (a few looks: one every POOL_OUT_CHECK_S of silence).
    with pids_paused([child.pid for child in psutil.Process(product.router_pid()).children()]):
        time.sleep(3 * settings.POOL_OUT_CHECK_S)
    wait_until(lambda: product.pid_of("redis") not in (0, killed), RESTART_BOUND_S, "redis restarted")
    done = person.until_done(answer, 600)
    assert done["status"] == "complete", done
    assert call.finished.wait(600) and call.complete, call.error
    rows = [row for row in person.stored(product.var_dir) if row[0] == answer]
    assert len(rows) == 1 and rows[0][3] == "complete" and rows[0][2], rows
    assert lost_or_doubled(person, product.var_dir) == 0


def shown_for_a_while(person, seconds: float) -> tuple[int, list[tuple[float, str]]]:
    """An answer the page has been showing for ``seconds`` and is still showing: (its id, its text as it
    came, with when). One that ends before (the model chose to stop) is replaced by another."""
    for _attempt in range(5):
        answer = person.ask(f"{LONG_PROMPT} ({len(person.sent)})", settings.CHAT_MAX_ANSWER_TOKENS)
        shown: list[tuple[float, str]] = []
        started = None
        while started is None or time.monotonic() - started < seconds:
            event = person.event(180)
            if event.get("message") != answer:
                continue
            if event["type"] == "done":
                break
            if event["type"] == "token":
                started = started or time.monotonic()
                shown.append((time.monotonic(), event["text"]))
        else:
            return answer, shown
    raise AssertionError("no answer kept streaming")


CREATE_KEY = (
    "from django.contrib.auth import get_user_model; from chat.api.keys import create_key; "
    "print(create_key(get_user_model().objects.get(username={!r}), 'faults')[1])"
)


def test_a_web_crash_keeps_what_the_page_showed_and_frees_its_slots_at_once(product, person):
    """The web process killed mid-answer: the stored partial holds what the page had shown up to one
    second before; the restarted process frees its predecessor's queue slots as it starts (no lease to
    wait out), and a new page's question is answered."""
    import redis as redis_client

    answer, shown = shown_for_a_while(person, 3.0)
    killed_at = time.monotonic()
    killed = product.kill("web")
    wait_until(lambda: product.pid_of("web") not in (0, killed), RESTART_BOUND_S, "web restarted")
    wait_until(lambda: httpx.get(base_url() + "/login/", timeout=5).status_code == 200, 60, "web answering")
    queue = redis_client.Redis.from_url(product.env["REDIS_URL"])
    now_ms = int(time.time() * 1000)
    held = sum(queue.zcount(key, now_ms, "+inf") for key in queue.scan_iter("qwenweb:queue:*:active"))
    assert held == 0, "the dead web process's slots were not freed at its successor's start"
    wait_until(lambda: not still_streaming(product.var_dir), 30, "the answer marked interrupted")
    stored = next(row for row in person.stored(product.var_dir) if row[0] == answer)
    whole = "".join(text for _at, text in shown)
    before = "".join(text for at, text in shown if at <= killed_at - 1.0)
    # The page stopped reading before the kill, and a save takes the text its next frame would carry:
    # the stored text may run a little past what the page got, and must agree with it where both have text.
    assert stored[2].startswith(before), ("saved more than a second behind the page", len(before), len(stored[2]))
    assert whole.startswith(stored[2]) or stored[2].startswith(whole), ("not what the page showed", stored[2], whole)
    assert (stored[3], stored[4]) == ("incomplete", INTERRUPTED)
    person.connect()
    assert person.until_done(person.ask("Say hi (after the crash).", 8), 240)["status"] == "complete"
