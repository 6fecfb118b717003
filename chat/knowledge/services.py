"""Writes of knowledge bases: collections, their documents and shares. Each checks who may do it
(``selectors``) and the collection's limits, named to the person when hit."""

from __future__ import annotations

import re

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.documents.removal import delete_document_rows, remove_files
from chat.documents.uploads import create_document
from chat.errors import ChatError, NotFound
from chat.knowledge.models import Collection, CollectionDocument, CollectionGroupShare, CollectionShare
from chat.knowledge.selectors import editable_collections, get_editable, readable_collections
from chat.models import Document

SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,49}$")


class CollectionError(ChatError):
    """A collection's write refused; the message names why."""


def create_collection(user, name: str, slug: str) -> Collection:
    name, slug = name.strip()[:100], slug.strip().lstrip("#").lower()
    if not name:
        raise CollectionError(_("A collection needs a name."))
    if not SLUG.match(slug):
        raise CollectionError(
            _("A mention is 1 to 50 lower-case letters, digits, - or _, starting with a letter or digit.")
        )
    try:
        with transaction.atomic():
            return Collection.objects.create(owner=user, name=name, slug=slug)
    except IntegrityError:
        raise CollectionError(_("The mention #%(slug)s is taken; choose another.") % {"slug": slug}) from None


def _owned(user, collection_id) -> Collection:
    collection = Collection.objects.filter(pk=collection_id, owner=user).first()
    if collection is None:
        raise NotFound(_("No such collection."))
    return collection


def rename_collection(user, collection_id, name: str) -> Collection:
    """Its owner's: a new name (the mention stays)."""
    collection = _owned(user, collection_id)
    name = name.strip()[:100]
    if not name:
        raise CollectionError(_("A collection needs a name."))
    collection.name = name
    collection.save(update_fields=["name"])
    return collection


def _check_limits(collection: Collection, size: int) -> None:
    count = collection.entries.count()
    if count >= settings.KNOWLEDGE_MAX_DOCUMENTS:
        raise CollectionError(
            ngettext(
                "The collection holds %(limit)d document, its limit.",
                "The collection holds %(limit)d documents, its limit.",
                settings.KNOWLEDGE_MAX_DOCUMENTS,
            )
            % {"limit": settings.KNOWLEDGE_MAX_DOCUMENTS}
        )
    used = collection.entries.aggregate(total=Sum("document__size_bytes"))["total"] or 0
    if used + size > settings.KNOWLEDGE_MAX_BYTES:
        raise CollectionError(
            _("This file would take the collection past its %(mb)d MB limit (%(used)d MB used).")
            % {"mb": settings.KNOWLEDGE_MAX_BYTES // 1_048_576, "used": used // 1_048_576}
        )


def add_document(user, collection_id, name: str, data: bytes, *, password: str | None = None) -> Document:
    """Check the upload (the documents' own checks) and the collection's limits; the caller queues its
    reading and indexing (``chat.knowledge.tasks.queue_indexing``) once this is committed."""
    with transaction.atomic():
        collection = get_editable(user, collection_id)
        Collection.objects.select_for_update().filter(pk=collection.pk).first()  # one add at a time
        _check_limits(collection, len(data))
        document = create_document(user, None, name, data, password=password)
        CollectionDocument.objects.create(collection=collection, document=document)
    return document


def share(user, collection_id, person, access: str = CollectionShare.Access.READ) -> CollectionShare:
    """Share with a named person (read or edit); only its owner may."""
    collection = Collection.objects.filter(pk=collection_id, owner=user).first()
    if collection is None:
        raise NotFound(_("No such collection."))
    if access not in CollectionShare.Access.values:
        raise CollectionError(_("Access is read or edit."))
    if person.pk == user.pk:
        raise CollectionError(_("The collection is yours already."))
    row, _created = CollectionShare.objects.update_or_create(
        collection=collection, user=person, defaults={"access": access}
    )
    return row


def share_with_group(user, collection_id, group, access: str = CollectionShare.Access.READ) -> CollectionGroupShare:
    """Share with a group's members (read or edit); only its owner may."""
    collection = _owned(user, collection_id)
    if access not in CollectionShare.Access.values:
        raise CollectionError(_("Access is read or edit."))
    row, _created = CollectionGroupShare.objects.update_or_create(
        collection=collection, group=group, defaults={"access": access}
    )
    return row


def unshare_group(user, collection_id, group) -> None:
    """Takes effect at the members' next search, as ``unshare`` does."""
    CollectionGroupShare.objects.filter(collection=_owned(user, collection_id), group=group).delete()


def unshare(user, collection_id, person) -> None:
    """Takes effect at the person's next search: every search asks ``readable_collections`` again."""
    collection = Collection.objects.filter(pk=collection_id, owner=user).first()
    if collection is None:
        raise NotFound(_("No such collection."))
    CollectionShare.objects.filter(collection=collection, user=person).delete()


def share_with_everyone(user, collection_id, shared: bool) -> None:
    """Staff only: every person may read the collection (or no longer)."""
    if not user.is_staff:
        raise CollectionError(_("Only staff can share a collection with everyone."))
    updated = Collection.objects.filter(pk=collection_id).update(shared_with_everyone=shared)
    if not updated:
        raise NotFound(_("No such collection."))


def delete_document(user, document_id) -> None:
    """A collection's document, its pages, passages, their words and vectors, at once; by those who may
    edit the collection."""
    with transaction.atomic():
        entry = CollectionDocument.objects.filter(
            document_id=document_id, collection__in=editable_collections(user)
        ).first()
        if entry is None:
            raise NotFound(_("No such document."))
        files = delete_document_rows(Document.objects.filter(pk=entry.document_id))
    remove_files(files)


def delete_collection(user, collection_id) -> None:
    """Its owner's: the collection, its documents and everything made of them."""
    with transaction.atomic():
        collection = Collection.objects.filter(pk=collection_id, owner=user).first()
        if collection is None:
            raise NotFound(_("No such collection."))
        files = delete_document_rows(Document.objects.filter(collection_entry__collection=collection))
        collection.delete()
    remove_files(files)


def pick_collections(user, conversation, collection_ids: list[int]) -> list[Collection]:
    """The collections the conversation's questions ask (the picker): only readable ones are kept."""
    chosen = list(readable_collections(user).filter(pk__in=collection_ids))
    conversation.collections.set(chosen)
    return chosen
