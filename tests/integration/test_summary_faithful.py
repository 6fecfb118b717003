"""A summary never shows a page that is not in its part, nor its own instructions.

The model here is a FAKE UPSTREAM (tests/support/fake_summary_upstream.py): the real
small model cannot be steered into inventing citations, echoing its prompt or copying
its source, so the fake does exactly that; the real Redis queue and database are used.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from chat.conversations.services import create_conversation
from chat.documents import uploads
from chat.documents.summary_review import COPIED_SOURCE, MAP_SYSTEM, RETRY_SYSTEM
from chat.documents.summary_run import SummaryRun
from chat.models import Conversation, Document, DocumentChunk, DocumentPage
from monitor.redis_clients import close_loop_clients
from tests.support.client import make_user
from tests.support.fake_summary_upstream import FakeSummaryUpstream
from tests.support.turns import run_turn, upstream_profile

pytestmark = pytest.mark.usefixtures("redis_server")

TOPICS = {1: "river floods market spring", 2: "council budget regions percent", 3: "staff numbers hiring freeze"}
MAP_ECHO = MAP_SYSTEM.format(language="English").split(". ")[0] + "."


def page_text(number: int) -> str:
    """About 300 words, so each page is a part of its own (the tests' chunks take 400 tokens)."""
    words = TOPICS[number].split()
    return " ".join(f"{words[i % 4]}{number} item{i}" for i in range(150))


def claim(number: int) -> str:
    return " ".join(page_text(number).split()[:12])


def answer(system: str, user: str) -> str:
    page = int(re.search(r"\[p\. (\d+)\]", user).group(1)) if "[p. " in user else 0
    if system.startswith("You combine"):  # the reduce step echoes its prompt and invents page 201
        return (
            f"{system} Summaries of parts, pp. 1–3:\nThe report covers the spring floods of the market, the council's "
            "budget for all regions and the hiring freeze for staff (p. 201). Floods come first and matter most "
            "to the market traders in every spring season (p. 1). The budget and the hiring freeze follow (pp. 2-3)."
        )
    if page == 2:  # copies its source, even when asked again
        return user
    if page == 3 and not system.startswith(RETRY_SYSTEM[:20]):  # copies its source once, then summarizes
        return user
    # Right sentence, wrong page (corrected), and pages that do not exist (removed).
    return f"{MAP_ECHO} {claim(page)} (p. 9). Spending rose sharply [p. 12]. Hiring paused (pp. 40-41)."


def cited_pages(text: str) -> set[int]:
    pages = set()
    for first, last in re.findall(r"(?:\bpp?\.|\bpages?|第)\s*(\d+)(?:\s*[–-]\s*(\d+))?", text):
        pages.update(range(int(first), int(last or first) + 1))
    return pages


def test_invented_citations_and_echoed_instructions_never_reach_the_summary():
    fake = FakeSummaryUpstream(answer)
    user = make_user()
    conversation = create_conversation(user)
    Conversation.objects.filter(id=conversation.id).update(profile=upstream_profile(fake.url))
    document = uploads.create_document(user, conversation, "report.txt", b"placeholder\n")
    for number in TOPICS:
        DocumentPage.objects.create(document=document, number=number, text=page_text(number))
    Document.objects.filter(id=document.id).update(status=Document.Status.SUMMARIZING, summary_language="en")

    async def main() -> str:
        try:
            return await SummaryRun(document.id, claimed=True).run()
        finally:
            await close_loop_clients()

    try:
        status = asyncio.run(main())
    finally:
        fake.close()
    document.refresh_from_db()
    assert status == Document.Status.READY, document.error
    summary = document.summary
    assert cited_pages(summary) and cited_pages(summary) <= {1, 2, 3}, summary
    for leaked in ("You summarize", "You combine", "Summaries of parts", "Part 1 of 3"):
        assert leaked not in summary, summary
    # Page 1's point cited page 9: its sentence is page 1's, so the citation now says so.
    assert f"{claim(1)} (p. 1)" in summary, summary
    # Page 2 was copied twice: asked again in other words, then named on the summary.
    assert "for p. 2 the model copied the document's text instead of summarizing it" in summary, summary
    chunks = {c.first_page: c for c in DocumentChunk.objects.filter(document=document, level=0)}
    assert chunks[2].note == COPIED_SOURCE and chunks[3].note == "" and chunks[1].note == ""
    assert document.chunks.get(level=1).note == ""  # its echo was taken out; the rest was its own
    asked = [system for system, text in fake.requests if text.startswith("Part 2 of 3")]
    assert len(asked) == 2 and asked[1].startswith(RETRY_SYSTEM[:20]) and not asked[0].startswith(RETRY_SYSTEM[:20])
    assert len([1 for _system, text in fake.requests if text.startswith("Part 1 of 3")]) == 1


def test_an_answer_about_a_document_never_shows_an_invented_page():
    """The answer streams through the turn runner; what the page gets and what is stored
    cite only pages the document has (a wrong page whose sentence matches is corrected)."""
    from chat.conversations.services import post_user_message

    def invent(system: str, user: str) -> str:
        return (
            f"{claim(2)} (p. 31). Floods matter (p. 1). Hiring froze [report.txt, p. 77]. "
            "See pages 40 to 45 for more. 预算增加（第90页）。"
        )

    fake = FakeSummaryUpstream(invent, n_ctx=4096)
    user = make_user()
    conversation = create_conversation(user)
    document = uploads.create_document(user, conversation, "report.txt", b"placeholder\n")
    for number in TOPICS:
        DocumentPage.objects.create(document=document, number=number, text=page_text(number))
    Document.objects.filter(id=document.id).update(status=Document.Status.READY)
    _question, assistant = post_user_message(conversation, "What does the report say about the budget?", None)
    try:
        events = run_turn(fake.url, conversation, assistant.id, user)
    finally:
        fake.close()
    shown = "".join(event["text"] for event in events if event["type"] == "token")
    assistant.refresh_from_db()
    assert events[-1]["status"] == "complete", events[-1]
    assert assistant.content == shown
    assert cited_pages(shown) == {1, 2}, shown
    assert f"{claim(2)} (p. 2)" in shown and "Floods matter (p. 1)" in shown, shown
    assert "report.txt" not in shown and "90" not in shown, shown
