"""Reads of knowledge bases. ``readable_collections`` is the one rule of who may read a collection:
every path that lists, searches or shows a passage starts from it."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _

from chat.errors import NotFound
from chat.knowledge.models import AnswerPassage, Collection, CollectionDocument, CollectionGroupShare, CollectionShare
from chat.models import Conversation, Document, DocumentPage


def readable_collections(user) -> QuerySet[Collection]:
    """Its owner's, those shared with the person by name or with a group of theirs, and those staff shared
    with everyone."""
    if user is None or not user.is_authenticated:
        return Collection.objects.none()
    return Collection.objects.filter(
        Q(owner=user) | Q(shares__user=user) | Q(group_shares__group__user=user) | Q(shared_with_everyone=True)
    ).distinct()


def editable_collections(user) -> QuerySet[Collection]:
    """Its owner's and those shared with the person (by name or with a group of theirs) for editing."""
    if user is None or not user.is_authenticated:
        return Collection.objects.none()
    edit = CollectionShare.Access.EDIT
    return Collection.objects.filter(
        Q(owner=user)
        | Q(shares__user=user, shares__access=edit)
        | Q(group_shares__group__user=user, group_shares__access=edit)
    ).distinct()


def get_readable(user, collection_id) -> Collection:
    collection = readable_collections(user).filter(pk=collection_id).first()
    if collection is None:
        raise NotFound(_("No such collection."))
    return collection


def get_editable(user, collection_id) -> Collection:
    collection = editable_collections(user).filter(pk=collection_id).first()
    if collection is None:
        raise NotFound(_("No such collection."))
    return collection


def collection_entries(user, collection_id) -> list[CollectionDocument]:
    """A readable collection's documents with their state, a failed one with its reason."""
    collection = get_readable(user, collection_id)
    return list(collection.entries.select_related("document").order_by("document__name"))


def in_a_collection(document_id) -> bool:
    """Whether the document was added to a collection (indexed, never summarized)."""
    return CollectionDocument.objects.filter(document_id=document_id).exists()


def readable_page(user, document_id, number: int) -> tuple[Document, str]:
    """A page of a collection's document the person may read now (the page a citation opens)."""
    document = Document.objects.filter(pk=document_id, collection_entry__collection__in=readable_collections(user))
    found = document.first()
    page = DocumentPage.objects.filter(document=found, number=number).first() if found else None
    if page is None:
        raise NotFound(_("No such page."))
    return found, page.text


def conversation_sources(user, conversation_id) -> dict[str, list[dict]]:
    """Per answer of the person's conversation, the collection passages it was given (document, page),
    of the collections the person may read now."""
    rows = (
        AnswerPassage.objects.filter(
            message__conversation_id=conversation_id,
            message__conversation__owner=user,
            passage__collection__in=readable_collections(user),
        )
        .order_by("message_id", "passage__document__name", "passage__page")
        .values_list("message_id", "passage__document_id", "passage__document__name", "passage__page")
    )
    sources: dict[str, list[dict]] = {}
    for message_id, document_id, name, page in rows:
        items = sources.setdefault(str(message_id), [])
        item = {"document": str(document_id), "name": name, "page": page}
        if item not in items:
            items.append(item)
    return sources


def picked_collection_ids(conversation_id) -> list[int]:
    return list(
        Conversation.collections.through.objects.filter(conversation_id=conversation_id).values_list(
            "collection_id", flat=True
        )
    )


def collection_shares(collection: Collection) -> tuple[list[CollectionShare], list[CollectionGroupShare]]:
    return (
        list(collection.shares.select_related("user").order_by("user__username")),
        list(collection.group_shares.select_related("group").order_by("group__name")),
    )


def entry_payload(entry: CollectionDocument) -> dict:
    return {
        "id": str(entry.document_id),
        "name": entry.document.name,
        "state": entry.state,
        "state_label": str(entry.get_state_display()),
        "error": entry.error,
        "passages_done": entry.passages_done,
        "passage_count": entry.passage_count,
    }
