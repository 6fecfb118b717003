"""Deleting documents: the rows first (pages, chunks and the summary go with them), then the
stored files. A worker still reading one finds it gone at its next heartbeat and stops."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction
from django.db.models import QuerySet

from chat.documents.selectors import get_document
from chat.documents.uploads import stored_file
from chat.models import Document


def delete_document_rows(documents: QuerySet[Document]) -> list[Path]:
    """Delete the documents' rows (inside the caller's transaction); the files to remove after it."""
    files = []
    for document in documents:
        path = stored_file(document)
        files += [path, path.with_suffix(".part")]
    documents.delete()
    return files


def remove_files(files: list[Path]) -> None:
    for path in files:
        path.unlink(missing_ok=True)


def delete_document(user, document_id) -> None:
    """The owner's document, with everything made of it; NotFound for anyone else."""
    document = get_document(user, document_id)
    with transaction.atomic():
        files = delete_document_rows(Document.objects.filter(id=document.id))
    remove_files(files)
