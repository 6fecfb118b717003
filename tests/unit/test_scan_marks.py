"""Answers about documents say which pages were read from a scan: the passages the model is
given are labelled ``read by OCR`` (or ``by the model``), and so are the answer's citations of
those pages, where every attached document with that page number agrees."""

from __future__ import annotations

import asyncio

from django.utils import translation

from chat.conversations.services import create_conversation
from chat.documents import retrieval
from chat.models import Document, DocumentPage
from tests.support.client import make_user


def attach(conversation, name: str, pages: dict[int, str], **fields) -> Document:
    document = Document.objects.create(
        owner=conversation.owner, conversation=conversation, name=name, kind=Document.Kind.PDF, **fields
    )
    for number, text in pages.items():
        DocumentPage.objects.create(document=document, number=number, text=text)
    return document


def test_passages_from_scanned_pages_are_labelled_for_the_model():
    conversation = create_conversation(make_user())
    attach(conversation, "scan.pdf", {1: "storms in march", 2: "budget grew", 3: "harbour lights"},
           ocr_pages=[2], model_read_pages=[3])  # fmt: skip
    attached = retrieval._attached(conversation.id)
    rendered = {p.page: p.render() for p in retrieval._ranked("storms budget harbour", attached)}
    assert rendered[1].startswith("[scan.pdf, p. 1]\n")
    assert rendered[2].startswith("[scan.pdf, p. 2, read by OCR]\n")
    assert rendered[3].startswith("[scan.pdf, p. 3, read by the model]\n")


def test_a_citation_is_marked_only_where_every_document_with_that_page_was_read_so():
    conversation = create_conversation(make_user())
    attach(conversation, "scan.pdf", {1: "storms", 2: "budget"}, ocr_pages=[1, 2])
    attach(conversation, "typed.pdf", {1: "a typed page"})
    checker = asyncio.run(retrieval.answer_citation_checker(conversation.id))
    # Page 1 of typed.pdf has a text layer: "(p. 1)" may mean it, so it is not marked.
    assert checker.check("Storms (p. 1). Budget (p. 2).") == "Storms (p. 1). Budget (p. 2, read by OCR)."


def test_the_mark_is_in_the_persons_language():
    conversation = create_conversation(make_user())
    attach(conversation, "scan.pdf", {1: "storms"}, ocr_pages=[1])
    with translation.override("zh-hans"):
        checker = asyncio.run(retrieval.answer_citation_checker(conversation.id))
    assert checker.check("Storms (p. 1).") == "Storms (p. 1, 经 OCR 文字识别读取)."
