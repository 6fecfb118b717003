"""Streamed chat through the real stack: Daphne, Redis, llama-server with the default model."""

import contextlib
import json
import re
import uuid

import httpx
import pytest
from django.conf import settings
from websockets.exceptions import InvalidStatus

from chat.models import Conversation, Message
from tests.support.client import chat_socket, events_until, login, make_user, send, text_of
from tests.support.hold import instance_paused
from tests.support.profiles import live_id_here

pytestmark = pytest.mark.usefixtures("web_server")

SHORT = {"seed": 7, "max_tokens": 24, "temperature": 0}


def answer_started(ws, frames: int = 1) -> tuple[dict, list[dict]]:
    """After a send: the 'accepted' event and the events up to the answer's ``frames``-th text frame."""
    accepted = events_until(ws, "accepted")[-1]
    assert accepted["type"] == "accepted", accepted
    seen: list[dict] = []
    while len([e for e in seen if e["type"] == "token"]) < frames:
        seen.append(json.loads(ws.recv(timeout=60)))
    return accepted, seen


@pytest.fixture
def person(llama):
    user = make_user()
    http = login(user)
    with chat_socket(http) as ws:
        yield user, http, ws
    http.close()


def test_chat_template_renders_gemma_turns(llama):
    key = llama.env["LLAMA_API_KEY"]
    response = httpx.post(
        llama.url + "/apply-template",
        json={"model": llama.model_id, "messages": [{"role": "user", "content": "hello"}]},
        headers={"Authorization": f"Bearer {key}"},
    )
    prompt = response.json()["prompt"]
    # llama-server drops the template's BOS here and adds it when it tokenizes.
    assert prompt == "<start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\n", prompt


def test_llama_server_wants_the_key_the_browser_never_sees(llama, person):
    _, http, _ = person
    assert httpx.get(llama.url + "/slots").status_code == 401
    page = http.get("/").text
    assert llama.env["LLAMA_API_KEY"] not in page


def test_answer_streams_and_is_saved_exactly_as_llama_server_wrote_it(person, llama):
    """Every token llama-server generated reaches the page once, in order, and is what is stored:
    compared with llama-server's own record of this request (its slot's generated text and count)."""
    user, http, ws = person
    marker = uuid.uuid4().hex[:8]  # finds this request's slot among llama-server's
    llama.wait_idle()
    predicted_before = llama.tokens_predicted()
    send(ws, type="send", text=f"Write a short poem about the sea ({marker}).", options={"seed": 1, "max_tokens": 48})
    accepted = events_until(ws, "accepted")[-1]
    assert accepted["type"] == "accepted"
    events = events_until(ws)
    done = events[-1]
    assert done["type"] == "done" and done["status"] == "complete", done
    frames = [e for e in events if e["type"] == "token"]
    assert frames and all(e["text"] for e in frames)  # one or more tokens each: how many frames is the machine's speed
    slot = llama.last_request(marker)
    assert not slot["is_processing"]
    generated = slot["generated"]
    assert text_of(events) == generated  # nothing lost, doubled or reordered on the way
    assert done["stats"]["output_tokens"] == llama.tokens_predicted() - predicted_before > 0
    assert done["stats"]["ttft_ms"] > 0 and done["stats"]["tokens_per_second"] > 0
    message = Message.objects.get(id=accepted["assistant_message"]["id"])
    assert message.status == "complete"
    assert message.content == generated
    assert message.conversation.owner == user
    # The conversation page shows it after a reload.
    page = http.get(f"/c/{accepted['conversation']}/").text
    history = json.loads(re.search(r'<script id="history-data" type="application/json">(.*?)</script>', page).group(1))
    assert [m["content"] for m in history if m["id"] == message.id] == [generated]


def test_stop_closes_the_upstream_request_and_frees_the_slot(person, llama, endless):
    _, _, ws = person
    served = live_id_here(endless)
    llama.wait_idle(served)
    predicted_before = llama.tokens_predicted(served)
    options = {"seed": 2, "max_tokens": 1000}
    question = f"Count to five hundred ({uuid.uuid4().hex[:8]})."
    send(ws, type="send", text=question, options=options, profile=endless.name)
    accepted, _ = answer_started(ws)
    with instance_paused(llama, served):  # the answer cannot end by itself before the Stop
        send(ws, type="stop", conversation=accepted["conversation"])
        done = events_until(ws)[-1]
        assert done["status"] == "stopped"
    llama.wait_idle(served, timeout=10)  # each hop (web, router, instance) notices on its next write
    slot = llama.last_request(question, served)
    assert slot["params"]["ignore_eos"]  # it would have gone on to its max_tokens
    generated = llama.tokens_predicted(served) - predicted_before
    assert 0 < generated < slot["params"]["n_predict"], "llama-server kept generating after Stop"
    message = Message.objects.get(id=accepted["assistant_message"]["id"])
    assert message.status == "stopped" and message.content  # the partial answer is kept


def test_regenerate_replaces_the_last_answer(person):
    _, _, ws = person
    send(ws, type="send", text="Say hello.", options=SHORT)
    first = events_until(ws, "accepted")[-1]
    events_until(ws)
    send(ws, type="regenerate", conversation=first["conversation"], options={"seed": 99, "max_tokens": 24})
    second = events_until(ws, "accepted")[-1]
    assert second["regenerate"] and events_until(ws)[-1]["status"] == "complete"
    answers = Message.objects.filter(conversation_id=first["conversation"], role="assistant")
    assert [m.id for m in answers] == [second["assistant_message"]["id"]]


def test_llama_server_killed_mid_stream(person, llama, endless):
    _, _, ws = person
    options = {"seed": 3, "max_tokens": 1000}
    send(ws, type="send", text="Tell me a long story about a dragon.", options=options, profile=endless.name)
    accepted, seen = answer_started(ws)
    with instance_paused(llama, live_id_here(endless)):  # the answer is still running when the server dies
        llama.kill()
    # Told at once that the answer waits for a server; none comes back within QWENWEB_RESUME_WAIT_S (the
    # only one stays down): told as before, the partial answer kept (issue 52).
    told = events_until(ws, "notice")[-1]
    assert "goes on as soon as a server can take it" in told["text"]
    after = events_until(ws, timeout=settings.RESUME_WAIT_S + 120)
    done = after[-1]
    assert done["status"] == "incomplete" and not [event for event in after if event["type"] == "resumed"]
    assert "stopped in the middle of the answer" in done["error"]
    message = Message.objects.get(id=accepted["assistant_message"]["id"])
    assert message.status == "incomplete" and message.content.startswith(text_of(seen))

    # Down at send time: said plainly, and the conversation stays usable.
    send(ws, type="send", conversation=accepted["conversation"], text="Are you there?", options=SHORT)
    events_until(ws, "accepted")
    done = events_until(ws)[-1]
    assert done["status"] == "error" and "not reachable" in done["error"]

    llama.start()
    send(ws, type="send", conversation=accepted["conversation"], text="Now?", options=SHORT)
    events_until(ws, "accepted")
    assert events_until(ws)[-1]["status"] == "complete"


def test_socket_without_session_is_refused(web_server):
    with pytest.raises(InvalidStatus) as refused:
        with chat_socket(None) as ws:
            ws.recv(timeout=5)
    assert refused.value.response.status_code == 403


def test_socket_from_foreign_origin_is_refused(person):
    _, http, _ = person
    with pytest.raises(InvalidStatus) as refused:
        with chat_socket(http, origin="http://evil.example") as ws:
            ws.recv(timeout=5)
    assert refused.value.response.status_code == 403


def test_other_users_conversation_is_refused(person):
    _, _, ws = person
    other = make_user()
    theirs = Conversation.objects.create(owner=other, title="private")
    Message.objects.create(conversation=theirs, role="user", content="secret")
    send(ws, type="send", conversation=str(theirs.id), text="let me in")
    event = events_until(ws)[-1]
    assert event["type"] == "error" and "does not exist" in event["message"]
    send(ws, type="send", conversation="not-a-uuid", text="hi")
    assert "does not exist" in events_until(ws)[-1]["message"]
    assert not theirs.messages.filter(content="let me in").exists()


def test_other_users_pages_are_404(person):
    _, http, _ = person
    theirs = Conversation.objects.create(owner=make_user(), title="private")
    assert http.get(f"/c/{theirs.id}/").status_code == 404
    token = http.cookies["csrftoken"]
    response = http.post(f"/c/{theirs.id}/delete/", data={"csrfmiddlewaretoken": token})
    assert response.status_code == 404
    assert Conversation.objects.filter(id=theirs.id).exists()


def test_oversized_message_is_refused_with_the_limit(person):
    from django.conf import settings

    _, _, ws = person
    send(ws, type="send", text="x" * (settings.CHAT_MAX_MESSAGE_CHARS + 1))
    event = events_until(ws)[-1]
    assert event["type"] == "error"
    assert f"limit is {settings.CHAT_MAX_MESSAGE_CHARS} characters" in event["message"]


def test_image_without_vision_projector_gets_a_clear_message(person):
    import base64
    import io

    from PIL import Image

    _, _, ws = person
    out = io.BytesIO()
    Image.new("RGB", (1024, 768), "blue").save(out, format="PNG")
    send(
        ws,
        type="send",
        text="What is this?",
        image="data:image/png;base64," + base64.b64encode(out.getvalue()).decode(),
    )
    accepted = events_until(ws, "accepted")[-1]
    done = events_until(ws)[-1]
    assert done["status"] == "error" and "cannot read images" in done["error"]
    stored = Message.objects.get(id=accepted["user_message"]["id"])
    from PIL import Image as Pil

    assert max(Pil.open(io.BytesIO(bytes(stored.image))).size) == 512


def test_history_longer_than_the_context_drops_old_turns_and_says_so(person):
    user, _, ws = person
    conversation = Conversation.objects.create(owner=user, title="long")
    filler = "The quick brown fox jumps over the lazy dog. " * 60  # ~600 tokens each
    for _ in range(6):
        Message.objects.create(conversation=conversation, role="user", content=filler)
        Message.objects.create(conversation=conversation, role="assistant", content=filler)
    send(ws, type="send", conversation=str(conversation.id), text="Summarize.", options=SHORT)
    events = events_until(ws)
    notices = [e for e in events if e["type"] == "notice"]
    assert notices and "earlier messages were left out" in notices[0]["text"]
    assert events[-1]["status"] == "complete"


def test_message_longer_than_the_context_is_refused_before_sending(person):
    _, _, ws = person
    send(ws, type="send", text="lorem ipsum dolor " * 1500)  # ~4500+ tokens, slot context 2048
    events_until(ws, "accepted")
    done = events_until(ws)[-1]
    assert done["status"] == "error" and "too long for this model" in done["error"]


def test_prompt_progress_is_reported(person):
    _, _, ws = person
    send(ws, type="send", text="Please read this. " * 150, options=SHORT)
    events = events_until(ws)
    progress = [e for e in events if e["type"] == "progress"]
    assert progress and progress[-1]["processed"] == progress[-1]["total"]


def test_new_rename_delete_own_conversation(person):
    user, http, _ = person
    token = http.cookies["csrftoken"]
    page = http.post("/c/new/", data={"csrfmiddlewaretoken": token})
    conversation = Conversation.objects.filter(owner=user).latest("created_at")
    assert str(conversation.id) in str(page.url)
    http.post(f"/c/{conversation.id}/rename/", data={"csrfmiddlewaretoken": token, "title": "  Trip   plans "})
    conversation.refresh_from_db()
    assert conversation.title == "Trip plans"
    refused = http.post(f"/c/{conversation.id}/rename/", data={"csrfmiddlewaretoken": token, "title": "x" * 201})
    assert "at most 200 characters" in refused.text
    listing = http.get("/").text
    assert "Trip plans" in listing
    http.post(f"/c/{conversation.id}/delete/", data={"csrfmiddlewaretoken": token})
    assert not Conversation.objects.filter(id=conversation.id).exists()


def test_answer_outlives_its_socket_and_a_new_socket_gets_all_of_it_once(person, llama, endless):
    """The socket that asked closes mid-answer; a fresh one subscribes: snapshot + numbered live
    text, put together, is exactly the stored answer, which finished as if nothing happened."""
    _, http, ws = person
    options = {"seed": 3, "max_tokens": 200}
    send(ws, type="send", text="Tell me a long story about a dragon.", options=options, profile=endless.name)
    accepted, seen = answer_started(ws)
    with contextlib.ExitStack() as kept_open:
        with instance_paused(llama, live_id_here(endless)):  # the answer is still running while the pages change
            again = kept_open.enter_context(chat_socket(http))
            ws.close()
            send(again, type="subscribe", conversation=accepted["conversation"])
            snapshot = json.loads(again.recv(timeout=10))
            assert snapshot["type"] == "snapshot" and snapshot["message"] == accepted["assistant_message"]["id"]
            assert snapshot["content"].startswith(text_of(seen))
        live = events_until(again)
    seqs = [e["seq"] for e in live if e["type"] == "token"]
    assert seqs == sorted(set(seqs)) and all(seq > snapshot["seq"] for seq in seqs)
    assert live[-1]["status"] == "complete"
    message = Message.objects.get(id=accepted["assistant_message"]["id"])
    assert message.status == "complete" and not message.error
    assert message.content == snapshot["content"] + text_of(live)
