"""Knowledge bases end to end: documents of a collection read and indexed by the real documents worker,
their passages embedded by the real llama-server serving embed-2k (the default model, mean-pooled), then
found by their words (FTS5) and by meaning (vectors), fused; a document that fails to read named with
its reason; deleting one leaves no row behind in any table."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from chat.knowledge.embedder import embed
from chat.knowledge.models import Collection, CollectionDocument, KnowledgePassage, KnowledgeVector
from chat.knowledge.search import retrieve
from chat.knowledge.services import add_document, create_collection, delete_document
from chat.knowledge.tasks import reembed_stale_collections
from chat.models import Document
from chat.tasks import resume_stalled_documents
from chat.usage.models import UsageRecord
from monitor.models import Node, ServerProfile
from monitor.nodes.facts import sha256_of
from monitor.profiles.loading import unload_profile
from monitor.public import LlamaRejected, close_loop_clients, model_sha256, serving_pool
from tests.support import pdfs
from tests.support.client import make_user
from tests.support.knowledge import ask, documents_found, filled_collection, row_counts
from tests.support.stack import wait_until

pytestmark = pytest.mark.usefixtures("celery_worker")

# Short notes, each about one thing. The questions below were checked against embed-2k: "How much did
# sales increase?" shares no word with any note, and its vector is nearest the revenue note's (cosine
# 0.78 against at most 0.69 for the others).
NOTES = {
    "cat.txt": "Our cat sleeps on a windowsill each afternoon, curled up in the sun.",
    "revenue.txt": "Quarterly revenue grew eleven percent in Europe, led by software licences.",
    "contract.txt": "Contract renewal requires signatures from both parties before March.",
    "holidays.txt": "Staff holidays are booked through the personnel office two weeks ahead.",
    "cooling.txt": "The server room is cooled by two redundant air conditioning units.",
    "invoices.txt": "Invoices must be paid within thirty days of receipt.",
}


@pytest.fixture
def embed_2k(llama):
    profile = ServerProfile.objects.get(name="embed-2k")
    yield profile
    asyncio.run(unload_profile(profile.name))


def files(notes: dict[str, str]) -> dict[str, bytes]:
    return {name: text.encode() for name, text in notes.items()}


def registered_sha256(profile: ServerProfile) -> str:
    """The model file's real SHA256, registered by this box's node as its start does."""
    digest = sha256_of(Path(settings.MODELS_DIR) / profile.model_file)
    node = Node.objects.get(is_local=True)
    models = [item for item in node.facts.get("models", []) if item.get("name") != profile.model_file]
    node.facts = {**node.facts, "models": [*models, {"name": profile.model_file, "sha256": digest}]}
    node.save(update_fields=["facts"])
    return digest


def test_a_collection_is_indexed_and_found_by_meaning_and_by_words(embed_2k):
    owner = make_user()
    digest = registered_sha256(embed_2k)
    # A scan with nothing on it: read by OCR, no text found: it fails, named, and blocks nothing.
    blank_scan = pdfs.image_text_pdf([[]])
    collection = filled_collection(owner, "office", {**files(NOTES), "blank.pdf": blank_scan})

    entries = {entry.document.name: entry for entry in collection.entries.select_related("document")}
    failed = entries.pop("blank.pdf")
    assert failed.state == CollectionDocument.State.FAILED and "no text" in failed.error
    assert {entry.state for entry in entries.values()} == {CollectionDocument.State.INDEXED}
    assert all(entry.passage_count == entry.passages_done == 1 for entry in entries.values())

    # Every passage has its words and its vector; the index names the model that made them.
    counts = row_counts(collection=collection)
    assert counts["passages"] == counts["vectors"] == len(NOTES)
    assert counts["fts"] == KnowledgePassage.objects.count()  # the table holds every collection's
    collection.refresh_from_db()
    assert collection.embed_model_file == embed_2k.model_file and collection.embed_dimensions == 640
    assert collection.embed_model_sha256 == digest == model_sha256(embed_2k)

    # By meaning: no word in common, the words find nothing, the vectors find the revenue note first.
    question = "How much did sales increase?"
    assert ask(owner, [collection], question, hybrid=False) == []
    found = ask(owner, [collection], question)
    assert documents_found(found)[0] == "revenue.txt"
    assert found[0].page == 1 and "eleven percent" in found[0].text and found[0].collection == "Office"

    # The usage ledger has the indexing's and the question's calls to the embedder, for the owner.
    calls = UsageRecord.objects.filter(user=owner, kind="knowledge")
    assert calls.count() >= 2 and set(calls.values_list("profile", "outcome")) == {("embed-2k", "ok")}
    assert all(tokens > 0 for tokens in calls.values_list("prompt_tokens", flat=True))

    # By words: both ways find the note that holds the rare word first.
    assert documents_found(ask(owner, [collection], "windowsill", hybrid=False))[:1] == ["cat.txt"]
    assert documents_found(ask(owner, [collection], "windowsill"))[:1] == ["cat.txt"]


def test_deleting_a_document_removes_its_passages_words_and_vectors_at_once(embed_2k):
    owner = make_user()
    long_text = "\n\n".join(f"Paragraph {n}: the archive keeps record {n} of the shipping ledger." for n in range(40))
    collection = filled_collection(owner, "ledger", {"ledger.txt": long_text.encode(), **files(NOTES)})
    ledger = KnowledgePassage.objects.filter(document__name="ledger.txt")
    assert ledger.count() > 2  # long enough to be cut into several overlapping passages
    before = row_counts()
    assert before["passages"] == before["vectors"] == before["fts"]
    cut = ledger.count()

    delete_document(owner, ledger.first().document_id)

    assert row_counts() == {key: value - cut for key, value in before.items()}
    assert not KnowledgePassage.objects.filter(document__name="ledger.txt").exists()
    kept = row_counts(collection=collection)
    assert kept["passages"] == kept["vectors"] == len(NOTES)
    assert "ledger.txt" not in documents_found(ask(owner, [collection], "shipping ledger archive record", k=20))


def test_a_batch_of_vectors_is_read_whole_though_its_answer_comes_with_its_head(embed_2k):
    """An indexing batch's answer (16 vectors: over 64 KiB of JSON) may come in the same read as its
    head; the transport once took it for a head too long."""
    texts = [f"Note {n} about the office." for n in range(16)]

    async def run() -> list[list[float]]:
        try:
            return await embed(await serving_pool(embed_2k), "test", texts, "background")
        finally:
            await close_loop_clients()

    vectors = asyncio.run(run())
    assert len(vectors) == 16 and {len(vector) for vector in vectors} == {640}


def test_a_changed_embedding_model_embeds_again_in_the_background_while_words_answer(embed_2k):
    owner = make_user()
    digest = registered_sha256(embed_2k)
    collection = filled_collection(owner, "models", files(NOTES))
    vectors = KnowledgeVector.objects.filter(passage__collection=collection)
    passages = set(vectors.values_list("passage_id", flat=True))
    # The vectors as another model made them (here: nothing like this one's): what a changed embeddings
    # profile leaves behind.
    vectors.update(vector=bytes(640 * 4))
    Collection.objects.filter(pk=collection.pk).update(
        embed_model_file="older-embedder.gguf", embed_model_sha256="0" * 64
    )

    question = "How much did sales increase?"  # no word in common with any note: only vectors find it
    assert ask(owner, [collection], question) == []  # another model's vectors are not compared with this one's
    assert documents_found(ask(owner, [collection], "windowsill"))[:1] == ["cat.txt"]  # the words answer

    assert collection.pk in reembed_stale_collections()  # beat's task queues it
    wait_until(
        lambda: Collection.objects.filter(pk=collection.pk, embed_model_sha256=digest).exists(),
        300,
        "the collection embedded again by the documents worker",
    )
    collection.refresh_from_db()
    assert collection.embed_model_file == embed_2k.model_file and collection.embed_dimensions == 640
    made_again = dict(vectors.values_list("passage_id", "vector"))
    assert made_again.keys() == passages  # one vector a passage, each made again
    assert all(any(blob) for blob in made_again.values())
    entries = list(collection.entries.all())
    assert {entry.state for entry in entries} == {CollectionDocument.State.INDEXED}
    assert all(entry.passages_done == entry.passage_count == 1 for entry in entries)
    assert documents_found(ask(owner, [collection], question))[0] == "revenue.txt"
    assert collection.pk not in reembed_stale_collections()  # nothing left to do for it


def test_a_collection_document_whose_worker_died_is_read_again_and_indexed_not_summarized(embed_2k):
    owner = make_user()
    registered_sha256(embed_2k)
    collection = create_collection(owner, "Stalled", "stalled")
    document = add_document(owner, collection.pk, "revenue.txt", NOTES["revenue.txt"].encode())
    # Its reading had started when the worker died: left extracting, its heartbeat long gone.
    long_ago = timezone.now() - timedelta(hours=1)
    Document.objects.filter(pk=document.id).update(status=Document.Status.EXTRACTING, heartbeat_at=long_ago)

    assert str(document.id) in resume_stalled_documents(older_than_s=60)  # beat's sweep
    done = (CollectionDocument.State.INDEXED, CollectionDocument.State.FAILED)
    wait_until(
        lambda: CollectionDocument.objects.filter(document_id=document.id, state__in=done).exists(),
        180,
        "the collection's document read again and indexed",
    )
    entry = CollectionDocument.objects.get(document_id=document.id)
    assert entry.state == CollectionDocument.State.INDEXED and entry.passages_done == entry.passage_count == 1
    read = Document.objects.get(pk=document.id)
    assert read.status == Document.Status.READY and read.summary == ""  # indexed, never summarized


def test_a_question_the_embedder_refuses_is_answered_by_its_words(embed_2k):
    """llama-server embeds a text within one batch only: a longer question is refused there (its own
    refusal, checked first), and the search goes on by the question's words."""
    owner = make_user()
    collection = filled_collection(owner, "long", files(NOTES))
    question = "Where does the cat sleep? " + "windowsill afternoon " * 1500

    async def refused():
        try:
            with pytest.raises(LlamaRejected):
                await embed(await serving_pool(embed_2k), str(owner.pk), [question], "person")
        finally:
            await close_loop_clients()

    asyncio.run(refused())
    retrieved = asyncio.run(retrieve(owner, [collection.pk], question))
    assert not retrieved.compared
    assert documents_found(retrieved.found)[:1] == ["cat.txt"]
    assert documents_found(ask(owner, [collection], "How much did sales increase?"))[0] == "revenue.txt"
