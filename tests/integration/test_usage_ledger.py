"""The usage ledger's rows as real requests leave them, through the running app (Daphne, Redis, real
llama-server with the default model): a chat answer's row carries the timings the turn got (a stopped
one its length), an API
request's the usage its answer reported, an embeddings request leaves its row, a streamed request whose
client goes away is recorded as stopped, a document's summary leaves a row per model call (the real
Celery worker); and the staff page shows them."""

from __future__ import annotations

import time

import httpx
import openai
import pytest
from django.contrib.auth.models import Group

from chat.api.keys import create_key
from chat.models import Conversation, Document, DocumentChunk, Message, UsageDay, UsageRecord
from tests.support import pdfs
from tests.support.client import base_url, chat_socket, events_until, login, make_user, send, upload_document
from tests.support.hold import instance_paused
from tests.support.profiles import live_id_here

pytestmark = pytest.mark.usefixtures("web_server")

MODEL = "chat-8k"
EMBEDDER = "embed-2k"
SHORT = {"max_tokens": 12, "seed": 3, "temperature": 0}
ENDLESS = {"grammar": 'root ::= "tick " root'}


def api(key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url() + "/v1", api_key=key, max_retries=0, timeout=120)


def rows_of(user) -> list[UsageRecord]:
    return list(UsageRecord.objects.filter(user=user).order_by("id"))


def rows_once_there(user, count: int, timeout_s: float = 30) -> list[UsageRecord]:
    """The person's rows once the app has written ``count`` of them (a request the client left is recorded
    by the app after the client is gone)."""
    deadline = time.monotonic() + timeout_s
    while len(rows := rows_of(user)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return rows


def test_a_chat_answer_leaves_one_row_with_the_timings_the_turn_got(llama):
    person = make_user()
    group = Group.objects.create(name=f"ledger-{person.username}")
    person.groups.add(group)
    http = login(person)
    with chat_socket(http) as ws:
        send(ws, type="send", text="Say hello.", options={"seed": 1, "max_tokens": 16, "temperature": 0})
        done = events_until(ws)[-1]
    http.close()
    assert done["status"] == "complete", done
    stats = done["stats"]
    [row] = rows_of(person)
    assert row.kind == "chat" and row.outcome == "ok" and row.api_key_id is None
    assert row.prompt_tokens == stats["prompt_tokens"] + (stats["cached_tokens"] or 0) > 0
    assert row.cached_tokens == (stats["cached_tokens"] or 0)
    assert row.output_tokens == stats["output_tokens"] > 0
    conversation = Conversation.objects.get(owner=person)
    assert row.profile == (conversation.profile.name if conversation.profile else MODEL)
    assert row.node and row.group_id == group.pk and row.duration_ms > 0
    day = UsageDay.objects.get(user=person)
    assert (day.requests, day.prompt_tokens, day.output_tokens) == (1, row.prompt_tokens, row.output_tokens)


def test_a_stopped_answer_is_recorded_as_stopped_with_its_length_as_its_output(llama, endless):
    person = make_user()
    http = login(person)
    with chat_socket(http) as ws:
        send(ws, type="send", text="Count.", options={"seed": 2, "max_tokens": 1000}, profile=endless.name)
        accepted = events_until(ws, "accepted")[-1]
        shown = ""
        while len(shown) < 40:  # enough text for its length to count tokens
            shown += events_until(ws, "token")[-1]["text"]
        with instance_paused(llama, live_id_here(endless)):  # the answer cannot end by itself before the Stop
            send(ws, type="stop", conversation=accepted["conversation"])
            done = events_until(ws)[-1]
    http.close()
    assert done["status"] == "stopped"
    message = Message.objects.get(id=accepted["assistant_message"]["id"])
    [row] = rows_of(person)
    assert (row.kind, row.outcome, row.profile) == ("chat", "stopped", endless.name)
    assert row.output_tokens == len(message.content + message.reasoning) // 4 >= 10


def test_api_requests_leave_one_row_each_with_the_usage_their_answer_reported(llama):
    person = make_user()
    key_row, key = create_key(person, "ledger agent")
    messages = [{"role": "user", "content": "Say hello."}]
    plain = api(key).chat.completions.create(
        model=MODEL, messages=messages, extra_body={"cache_prompt": False}, **SHORT
    )
    chunks = list(
        api(key).chat.completions.create(
            model=MODEL, messages=messages, stream=True, stream_options={"include_usage": True}, **SHORT
        )
    )
    streamed = chunks[-1].usage
    vectors = api(key).embeddings.create(model=EMBEDDER, input=["the usage ledger", "counts every request"])
    rows = rows_of(person)
    assert [row.kind for row in rows] == ["api-chat", "api-chat", "api-embedding"]
    assert all(row.api_key_id == key_row.pk and row.outcome == "ok" and row.node for row in rows)
    assert (rows[0].prompt_tokens, rows[0].output_tokens, rows[0].cached_tokens) == (
        plain.usage.prompt_tokens,
        plain.usage.completion_tokens,
        0,  # cache_prompt off: nothing came from the cache
    )
    assert (rows[1].prompt_tokens, rows[1].output_tokens) == (streamed.prompt_tokens, streamed.completion_tokens)
    assert rows[1].cached_tokens <= rows[1].prompt_tokens
    assert rows[2].profile == EMBEDDER and rows[2].prompt_tokens == vectors.usage.prompt_tokens > 0
    assert rows[2].output_tokens == 0


def test_a_stream_whose_client_goes_away_is_recorded_as_stopped(llama):
    person = make_user()
    _row, key = create_key(person, "leaving agent")
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Tick."}], "stream": True, "max_tokens": 2000}
    with httpx.stream(
        "POST",
        base_url() + "/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}"},
        json={**body, **ENDLESS},
        timeout=120,
    ) as response:
        assert response.status_code == 200
        next(response.iter_bytes())  # the answer has begun; the client leaves in the middle of it
    [row] = rows_once_there(person, 1)
    assert row.kind == "api-chat" and row.outcome == "stopped"


def test_the_staff_page_shows_what_requests_recorded(llama):
    person, staff = make_user(), make_user(is_staff=True)
    _row, key = create_key(person, "page agent")
    api(key).chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi."}], **SHORT)
    [row] = rows_of(person)
    http = login(staff)
    page = http.get("/staff/usage/", params={"person": person.pk, "by": "model"})
    http.close()
    assert page.status_code == 200
    assert f"<td>{MODEL}</td><td>1</td><td>0</td><td>{row.prompt_tokens}</td>" in page.text


def test_a_document_summary_leaves_a_row_per_model_call_for_the_documents_owner(llama, celery_worker):
    person = make_user()
    http = login(person)
    body = upload_document(http, "ledger.pdf", pdfs.report_pdf(12, words_per_page=40), language="en").json()
    http.close()
    deadline = time.monotonic() + 300
    while (document := Document.objects.get(id=body["document"]["id"])).status not in ("ready", "failed"):
        assert time.monotonic() < deadline, document.status
        time.sleep(0.3)
    assert document.status == "ready", document.error
    parts = DocumentChunk.objects.filter(document=document).count()
    rows = rows_of(person)
    assert parts > 0 and len(rows) >= parts  # a part whose summary was asked again counts each call
    assert all(row.kind == "document" and row.outcome == "ok" and row.api_key_id is None for row in rows)
    assert all(row.prompt_tokens > 0 and row.output_tokens > 0 and row.node for row in rows)
