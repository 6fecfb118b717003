"""The built-in ``search_documents`` tool: a person's own documents and the collections they may read,
never a passage of another person's documents or of a collection not shared with them."""

from __future__ import annotations

from asgiref.sync import async_to_sync

from chat.knowledge.models import CollectionShare
from chat.tools.builtin import PROVIDER, SEARCH_DOCUMENTS
from tests.support.client import make_user
from tests.support.knowledge import own_document, words_collections

WORD = "zephyrium"  # a made-up word every passage below holds


def _own_document(owner, name: str):
    return own_document(owner, name, f"{name} says {WORD} is stored in bay four.")


def _search(user) -> str:
    result = async_to_sync(PROVIDER.call)(SEARCH_DOCUMENTS, {"query": WORD}, user=user, timeout=30)
    assert not result.is_error, result.text
    return result.text


def test_search_finds_own_documents_and_readable_collections_and_nothing_else():
    reader, other = make_user(), make_user()
    suffix = reader.username[-8:]
    _own_document(reader, f"mine-{suffix}")
    _own_document(other, f"theirs-{suffix}")
    with words_collections() as make:

        def collection(slug: str, **fields):
            return make(other, f"{slug}-{suffix}", f"{slug}-{suffix} passage: {WORD} ships on Fridays.", **fields)

        collection("private")
        shared = collection("shared")
        CollectionShare.objects.create(collection=shared, user=reader)
        collection("everyone", shared_with_everyone=True)

        text = _search(reader)
        assert f"mine-{suffix}" in text and f"shared-{suffix} passage" in text and f"everyone-{suffix} passage" in text
        assert f"theirs-{suffix}" not in text and f"private-{suffix}" not in text

        # Unshared: gone from the next search.
        CollectionShare.objects.filter(collection=shared, user=reader).delete()
        assert f"shared-{suffix}" not in _search(reader)
        # The other person's own view holds what is theirs, not the reader's.
        theirs = _search(other)
        assert f"theirs-{suffix}" in theirs and f"private-{suffix} passage" in theirs and f"mine-{suffix}" not in theirs
