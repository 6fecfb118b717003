"""The built-in ``search_documents`` tool: a person's own documents and the collections they may read,
never a passage of another person's documents or of a collection not shared with them."""

from __future__ import annotations

from asgiref.sync import async_to_sync

from chat.knowledge.models import Collection, CollectionDocument, CollectionShare, KnowledgePassage
from chat.knowledge.vectors import add_terms
from chat.models import Document, DocumentPage
from chat.tools.builtin import PROVIDER, SEARCH_DOCUMENTS
from tests.support.client import make_user

WORD = "zephyrium"  # a made-up word every passage below holds


def _own_document(owner, name: str) -> Document:
    document = Document.objects.create(owner=owner, name=name, kind="txt", status=Document.Status.READY)
    DocumentPage.objects.create(document=document, number=1, text=f"{name} says {WORD} is stored in bay four.")
    return document


def _collection(owner, slug: str, **fields) -> Collection:
    collection = Collection.objects.create(owner=owner, name=slug, slug=slug, **fields)
    document = Document.objects.create(owner=owner, name=f"{slug}.txt", kind="txt", status=Document.Status.READY)
    CollectionDocument.objects.create(collection=collection, document=document, state="indexed")
    passage = KnowledgePassage.objects.create(
        collection=collection, document=document, index=0, page=1, text=f"{slug} passage: {WORD} ships on Fridays."
    )
    add_terms([(passage.pk, passage.text)])
    return collection


def _search(user) -> str:
    result = async_to_sync(PROVIDER.call)(SEARCH_DOCUMENTS, {"query": WORD}, user=user, timeout=30)
    assert not result.is_error, result.text
    return result.text


def test_search_finds_own_documents_and_readable_collections_and_nothing_else():
    reader, other = make_user(), make_user()
    suffix = reader.username[-8:]
    _own_document(reader, f"mine-{suffix}")
    _own_document(other, f"theirs-{suffix}")
    _collection(other, f"private-{suffix}")
    shared = _collection(other, f"shared-{suffix}")
    CollectionShare.objects.create(collection=shared, user=reader)
    _collection(other, f"everyone-{suffix}", shared_with_everyone=True)

    text = _search(reader)
    assert f"mine-{suffix}" in text and f"shared-{suffix} passage" in text and f"everyone-{suffix} passage" in text
    assert f"theirs-{suffix}" not in text and f"private-{suffix}" not in text

    # Unshared: gone from the next search.
    CollectionShare.objects.filter(collection=shared, user=reader).delete()
    assert f"shared-{suffix}" not in _search(reader)
    # The other person's own view holds what is theirs, not the reader's.
    theirs = _search(other)
    assert f"theirs-{suffix}" in theirs and f"private-{suffix} passage" in theirs and f"mine-{suffix}" not in theirs
