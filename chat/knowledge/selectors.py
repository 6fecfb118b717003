"""Reads of knowledge bases. ``readable_collections`` is the one rule of who may read a collection:
every path that lists, searches or shows a passage starts from it."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _

from chat.errors import NotFound
from chat.models import Collection, CollectionDocument, CollectionShare


def readable_collections(user) -> QuerySet[Collection]:
    """Its owner's, those shared with the person by name, and those staff shared with everyone."""
    if user is None or not user.is_authenticated:
        return Collection.objects.none()
    return Collection.objects.filter(Q(owner=user) | Q(shares__user=user) | Q(shared_with_everyone=True)).distinct()


def editable_collections(user) -> QuerySet[Collection]:
    """Its owner's and those shared with the person for editing."""
    if user is None or not user.is_authenticated:
        return Collection.objects.none()
    return Collection.objects.filter(
        Q(owner=user) | Q(shares__user=user, shares__access=CollectionShare.Access.EDIT)
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
