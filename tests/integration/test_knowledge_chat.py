"""Knowledge collections in the chat, with the real parts: documents read and indexed by the real
documents worker and embedded by the real llama-server serving embed-2k; the turn's passages taken by
the product's own hook (``with_knowledge``); a whole turn through the real chat socket where the
collections hold nothing relevant (said plainly, no model call); every way a passage could reach
someone who may not read its collection (the prompt, the answer's sources, the page a citation opens,
the collection's pages, the picker, a mention); a failed document and a limit named on the page."""

from __future__ import annotations

import asyncio

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings

from chat.documents.citations import CitationStream
from chat.knowledge.in_chat import NothingFound, with_knowledge
from chat.knowledge.models import AnswerPassage, CollectionDocument
from chat.knowledge.services import pick_collections, share, share_with_group, unshare, unshare_group
from chat.models import Conversation, Message
from monitor.profiles.loading import unload_profile
from tests.support import pdfs
from tests.support.client import chat_socket, events_until, login, make_user, send
from tests.support.knowledge import filled_collection, row_counts
from tests.support.stack import wait_until

pytestmark = [pytest.mark.usefixtures("celery_worker"), pytest.mark.database("sqlite")]

SECRET = "The merger code name is Bluebird and the price is forty dollars a share."
HOLIDAYS = "Staff holidays are booked through the personnel office two weeks ahead."
QUESTION = "What is the merger code name?"
UNRELATED = "How many moons does Jupiter have?"
# embed-2k puts this question at cosine 0.815 from the merger note: unrelated, but above a bar of 0.75.
WEATHER = "What is the weather like today?"
BIG = 10**6  # a budget no prompt here comes near: nothing is counted


class NoCounter:
    """The budget is never reached here; counting would be a defect of the test's budget."""

    async def count_tokens(self, text: str) -> int:
        raise AssertionError("counted")


@pytest.fixture(scope="module")
def world(llama_server, celery_worker):
    alice, bob = make_user(), make_user()
    handbook = filled_collection(alice, "handbook", {"merger.txt": SECRET.encode(), "holidays.txt": HOLIDAYS.encode()})
    yield {"alice": alice, "bob": bob, "handbook": handbook}
    asyncio.run(unload_profile(settings.KNOWLEDGE_EMBED_PROFILE))


def _client(user) -> Client:
    client = Client(SERVER_NAME="127.0.0.1")  # a host the box answers to (ALLOWED_HOSTS is not "*")
    client.force_login(user)
    return client


def _turn(user, question: str, picked=()) -> tuple[Conversation, Message]:
    conversation = Conversation.objects.create(owner=user)
    conversation.collections.set(picked)
    Message.objects.create(conversation=conversation, role=Message.Role.USER, content=question)
    answer = Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, status="streaming")
    return conversation, answer


def _ask(conversation: Conversation, answer: Message, question: str):
    messages = [{"role": "user", "content": question}]
    return asyncio.run(with_knowledge(NoCounter(), conversation, answer.pk, messages, BIG, None))


def test_the_picked_collection_is_asked_and_its_citations_checked(world):
    alice, handbook = world["alice"], world["handbook"]
    conversation, answer = _turn(alice, QUESTION, [handbook])
    messages, citations = _ask(conversation, answer, QUESTION)
    system = messages[0]
    assert system["role"] == "system" and SECRET in system["content"] and "[merger.txt, p. 1]" in system["content"]
    assert messages[1] == {"role": "user", "content": QUESTION}
    # The answer's sources are the passages given; its citations checked against their pages.
    given = AnswerPassage.objects.filter(message=answer).values_list("passage__document__name", flat=True)
    assert "merger.txt" in given
    assert isinstance(citations, CitationStream)
    checked = citations.feed("It is Bluebird [merger.txt, p. 1], not Redbird [merger.txt, p. 7].") + citations.finish()
    assert checked == "It is Bluebird [merger.txt, p. 1], not Redbird."
    # The page asks for the answer's sources and opens the page cited.
    http = _client(alice)
    sources = http.get(f"/c/{conversation.id}/sources/").json()["sources"][str(answer.pk)]
    cited = next(source for source in sources if source["name"] == "merger.txt")
    page = http.get(f"/collections/documents/{cited['document']}/pages/{cited['page']}/")
    assert page.status_code == 200 and "Bluebird" in page.content.decode()


def test_a_mention_asks_a_collection_for_that_turn_only_if_readable(world):
    alice, bob, handbook = world["alice"], world["bob"], world["handbook"]
    question = f"#handbook {QUESTION}"
    conversation, answer = _turn(alice, question)
    messages, _citations = _ask(conversation, answer, question)
    assert SECRET in messages[0]["content"]
    assert list(conversation.collections.all()) == []  # for this turn only
    # Bob cannot read it: his mention is no mention (the model is asked as if none was written).
    conversation, answer = _turn(bob, question)
    messages, citations = _ask(conversation, answer, question)
    assert messages == [{"role": "user", "content": question}] and citations is None
    assert not AnswerPassage.objects.filter(message=answer).exists()
    assert handbook.slug == "handbook"


@pytest.mark.parametrize("question", [UNRELATED, WEATHER])
def test_nothing_relevant_is_said_plainly(world, question):
    conversation, answer = _turn(world["alice"], question, [world["handbook"]])
    with pytest.raises(NothingFound) as refused:
        _ask(conversation, answer, question)
    assert "#handbook" in str(refused.value) and "no answer was made up" in str(refused.value)
    assert not AnswerPassage.objects.filter(message=answer).exists()


def test_a_question_in_other_words_finds_its_passage_by_meaning(world):
    """No content word shared with the merger note: found by its vector alone (cosine 0.843 with embed-2k)."""
    question = "How much will the acquisition cost?"
    conversation, answer = _turn(world["alice"], question, [world["handbook"]])
    messages, _citations = _ask(conversation, answer, question)
    assert SECRET in messages[0]["content"]


def test_nothing_found_is_the_answer_and_the_model_is_not_called(world, web_server):
    # A person of their own: the other tests leave Alice's hand-made answers 'streaming', and two of
    # those are her limit of answers in flight (CHAT_TURNS_IN_FLIGHT).
    alice, carol = world["alice"], make_user()
    share(alice, world["handbook"].pk, carol)
    http = login(carol)
    conversation = Conversation.objects.create(owner=carol)
    conversation.collections.set([world["handbook"]])
    with chat_socket(http) as ws:
        send(ws, type="send", conversation=str(conversation.id), text=UNRELATED)
        events = events_until(ws, "done", timeout=300)
    kinds = [event["type"] for event in events]
    assert kinds[-1] == "done", events[-1]
    assert "started" not in kinds  # no serving slot taken: the model was not asked
    done = events[-1]
    assert done["status"] == "complete" and done["error"] == ""
    answer = Message.objects.get(pk=done["message"])
    assert answer.content.startswith("Nothing in #handbook is relevant enough")
    assert "".join(event["text"] for event in events if event["type"] == "token") == answer.content


def test_unsharing_takes_effect_at_the_next_question_by_every_path(world):
    alice, bob, handbook = world["alice"], world["bob"], world["handbook"]
    group = Group.objects.create(name=f"legal-{bob.pk}")
    bob.groups.add(group)
    http = _client(bob)
    for grant, revoke in (
        (lambda: share(alice, handbook.pk, bob), lambda: unshare(alice, handbook.pk, bob)),
        (lambda: share_with_group(alice, handbook.pk, group), lambda: unshare_group(alice, handbook.pk, group)),
    ):
        grant()
        assert pick_collections(bob, Conversation.objects.create(owner=bob), [handbook.pk]) == [handbook]
        conversation, answer = _turn(bob, QUESTION, [handbook])
        messages, _citations = _ask(conversation, answer, QUESTION)
        assert SECRET in messages[0]["content"]
        source = http.get(f"/c/{conversation.id}/sources/").json()["sources"][str(answer.pk)][0]
        page_url = f"/collections/documents/{source['document']}/pages/{source['page']}/"
        assert http.get(page_url).status_code == 200
        assert http.get(f"/collections/{handbook.pk}/").status_code == 200
        revoke()
        # The next question, the answer's sources, the page, the collection's pages: gone.
        second, answer = _turn(bob, QUESTION, [handbook])
        with pytest.raises(NothingFound) as refused:
            _ask(second, answer, QUESTION)
        assert "#handbook" not in str(refused.value)  # not even its mention is named
        assert http.get(f"/c/{conversation.id}/sources/").json()["sources"] == {}
        assert http.get(page_url).status_code == 404
        assert http.get(f"/collections/{handbook.pk}/").status_code == 404
        assert http.get(f"/collections/{handbook.pk}/documents/").status_code == 404
        assert "Bluebird" not in http.get("/collections/").content.decode()
        # The picker keeps only what the person may read.
        assert pick_collections(bob, conversation, [handbook.pk]) == []
    # Nor does someone else's conversation's sources list answer.
    other = _client(alice)
    assert other.get(f"/c/{conversation.id}/sources/").status_code == 404


def test_a_failed_document_is_named_and_the_others_are_read(world, web_server):
    alice = world["alice"]
    http = _client(alice)
    created = http.post("/collections/new/", {"name": "Mixed", "slug": f"mixed-{alice.pk}"})
    collection_url = created.headers["Location"]
    collection_id = int(collection_url.strip("/").split("/")[-1])
    for name, data in (("blank-scan.pdf", pdfs.image_text_pdf([[]])), ("fine.txt", HOLIDAYS.encode())):
        response = http.post(f"/collections/{collection_id}/add/", {"file": SimpleUploadedFile(name, data)})
        assert response.status_code == 201, response.content
    entries = CollectionDocument.objects.filter(collection_id=collection_id)
    wait_until(lambda: not entries.exclude(state__in=["indexed", "failed"]).exists(), 300, "both documents done")
    states = {row["name"]: row for row in http.get(f"/collections/{collection_id}/documents/").json()["documents"]}
    assert states["fine.txt"]["state"] == "indexed"
    assert states["blank-scan.pdf"]["state"] == "failed" and states["blank-scan.pdf"]["error"]
    # Deleting a document takes its passages, vectors, words and answer sources at once.
    fine = entries.get(document__name="fine.txt")
    before = row_counts()
    assert row_counts(document=fine.document)["passages"] == 1
    response = http.post(f"/collections/documents/{fine.document_id}/delete/")
    assert response.status_code == 200
    after = row_counts()
    assert (before["passages"] - after["passages"], before["vectors"] - after["vectors"]) == (1, 1)
    assert before["fts"] - after["fts"] == 1


def test_a_limit_is_named_to_the_person(world):
    alice = world["alice"]
    http = _client(alice)
    with override_settings(KNOWLEDGE_MAX_DOCUMENTS=2):
        response = http.post(
            f"/collections/{world['handbook'].pk}/add/", {"file": SimpleUploadedFile("third.txt", b"one more")}
        )
    assert response.status_code == 400
    assert response.json()["error"] == "The collection holds 2 documents, its limit."
    with override_settings(KNOWLEDGE_MAX_BYTES=100):
        response = http.post(
            f"/collections/{world['handbook'].pk}/add/", {"file": SimpleUploadedFile("big.txt", b"x" * 200)}
        )
    assert "past its 0 MB limit" in response.json()["error"]


def test_only_staff_share_with_everyone_and_only_named_actions_exist(world):
    alice, handbook = world["alice"], world["handbook"]
    url = f"/collections/{handbook.pk}/do/everyone/"
    _client(alice).post(url, {"shared": "on"})
    handbook.refresh_from_db()
    assert not handbook.shared_with_everyone
    assert _client(alice).post(f"/collections/{handbook.pk}/do/give-away/").status_code == 404
    staff = make_user(is_staff=True)
    _client(staff).post(url, {"shared": "on"})
    try:
        handbook.refresh_from_db()
        assert handbook.shared_with_everyone
        assert "#handbook" in _client(world["bob"]).get("/collections/").content.decode()
    finally:
        _client(staff).post(url, {})
    handbook.refresh_from_db()
    assert not handbook.shared_with_everyone
