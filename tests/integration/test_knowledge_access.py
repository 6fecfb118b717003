"""Every way a passage could reach someone who may not read its collection: another person's collection,
one shared and then unshared, one staff shared with everyone and then no longer, a deleted document, a
deleted collection; the filter applied before ranking (a crowd of forbidden passages never pushes a
readable one out). The limits of a collection, named when hit."""

from __future__ import annotations

import asyncio

import pytest
from django.conf import settings

from chat.errors import NotFound
from chat.knowledge.models import CollectionShare, KnowledgePassage
from chat.knowledge.selectors import collection_entries, readable_collections
from chat.knowledge.services import (
    CollectionError,
    add_document,
    create_collection,
    delete_collection,
    delete_document,
    share,
    share_with_everyone,
    unshare,
)
from monitor.profiles.loading import unload_profile
from tests.support.client import make_user
from tests.support.knowledge import ask, documents_found, filled_collection, fts_rows, row_counts

pytestmark = pytest.mark.usefixtures("celery_worker")

SECRET = "The merger code name is Bluebird and the price is forty dollars a share."


@pytest.fixture(scope="module")
def world(llama_server, celery_worker):
    alice, bob, carol = make_user(), make_user(), make_user()
    alpha = filled_collection(alice, "alpha", {"secret.txt": SECRET.encode()})
    beta = filled_collection(bob, "beta", {"cat.txt": b"Our cat sleeps on a windowsill each afternoon."})
    # Carol's: many passages on the same word, better matches than Bob's.
    crowd = {f"sill-{n}.txt": f"Windowsill {n}: windowsill paint, windowsill wood.".encode() for n in range(4)}
    gamma = filled_collection(carol, "gamma", crowd)
    yield {"alice": alice, "bob": bob, "carol": carol, "alpha": alpha, "beta": beta, "gamma": gamma}
    asyncio.run(unload_profile(settings.KNOWLEDGE_EMBED_PROFILE))


def test_another_persons_collection_gives_nothing_by_any_path(world):
    bob, alpha = world["bob"], world["alpha"]
    assert documents_found(ask(world["alice"], [alpha], "Bluebird merger price")) == ["secret.txt"]
    assert ask(bob, [alpha], "Bluebird merger price") == []
    assert ask(bob, [alpha], "Bluebird merger price", hybrid=False) == []
    assert alpha not in readable_collections(bob)
    with pytest.raises(NotFound):
        collection_entries(bob, alpha.pk)
    with pytest.raises(NotFound):
        add_document(bob, alpha.pk, "mine.txt", b"planted text")
    with pytest.raises(NotFound):
        delete_document(bob, KnowledgePassage.objects.filter(collection=alpha).first().document_id)
    with pytest.raises(NotFound):
        share(bob, alpha.pk, bob, "edit")  # only its owner shares it


def test_the_collections_are_filtered_before_anything_is_ranked(world, monkeypatch):
    monkeypatch.setattr(settings, "KNOWLEDGE_CANDIDATES", 2)  # fewer candidates than Carol's better matches
    found = ask(world["bob"], [world["gamma"], world["beta"]], "windowsill", k=10)
    assert documents_found(found) == ["cat.txt"]
    found = ask(world["bob"], [world["gamma"], world["beta"]], "windowsill", k=10, hybrid=False)
    assert documents_found(found) == ["cat.txt"]


def test_unsharing_and_sharing_with_everyone_take_effect_at_the_next_search(world):
    alice, bob, carol, alpha = world["alice"], world["bob"], world["carol"], world["alpha"]
    share(alice, alpha.pk, bob, CollectionShare.Access.READ)
    assert documents_found(ask(bob, [alpha], "Bluebird merger price")) == ["secret.txt"]
    assert [entry.document.name for entry in collection_entries(bob, alpha.pk)] == ["secret.txt"]
    with pytest.raises(NotFound):  # read, not edit
        add_document(bob, alpha.pk, "mine.txt", b"planted text")
    unshare(alice, alpha.pk, bob)
    assert ask(bob, [alpha], "Bluebird merger price") == []

    with pytest.raises(CollectionError):
        share_with_everyone(alice, alpha.pk, True)  # staff only
    share_with_everyone(make_user(is_staff=True), alpha.pk, True)
    assert documents_found(ask(carol, [alpha], "Bluebird merger price")) == ["secret.txt"]
    share_with_everyone(make_user(is_staff=True), alpha.pk, False)
    assert ask(carol, [alpha], "Bluebird merger price") == []


def test_a_deleted_document_or_collection_gives_nothing_and_leaves_no_row(world):
    dave = make_user()
    delta = filled_collection(dave, "delta", {"a.txt": b"Falcon project budget.", "b.txt": b"Heron project budget."})
    share(dave, delta.pk, world["bob"], CollectionShare.Access.EDIT)
    a_id = KnowledgePassage.objects.get(collection=delta, document__name="a.txt").document_id
    delete_document(world["bob"], a_id)  # an editor may
    assert documents_found(ask(dave, [delta], "Falcon Heron project budget")) == ["b.txt"]
    assert row_counts(collection=delta) == {"passages": 1, "vectors": 1, "fts": fts_rows()}

    before = fts_rows()
    delete_collection(dave, delta.pk)
    assert ask(dave, [delta], "Falcon Heron project budget") == []
    assert ask(world["bob"], [delta], "Falcon Heron project budget") == []
    assert row_counts(collection_id=delta.pk)["passages"] == row_counts(collection_id=delta.pk)["vectors"] == 0
    assert fts_rows() == before - 1


def test_a_collections_limits_are_named_when_hit(monkeypatch):
    owner = make_user()
    collection = create_collection(owner, "Limits", "limits")
    with pytest.raises(CollectionError, match="taken"):
        create_collection(owner, "Again", "#limits")
    with pytest.raises(CollectionError, match="mention"):
        create_collection(owner, "Bad", "no spaces here")
    monkeypatch.setattr(settings, "KNOWLEDGE_MAX_BYTES", 3 * 1024 * 1024)
    with pytest.raises(CollectionError, match="past its 3 MB limit"):
        add_document(owner, collection.pk, "big.txt", b"word " * (700 * 1024))
    monkeypatch.setattr(settings, "KNOWLEDGE_MAX_DOCUMENTS", 1)
    add_document(owner, collection.pk, "one.txt", b"One document.")
    with pytest.raises(CollectionError, match="holds 1 document, its limit"):
        add_document(owner, collection.pk, "two.txt", b"Two documents.")
    assert collection.entries.count() == 1
