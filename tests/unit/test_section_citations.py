"""A DOCX's or HTML's sections are cited as ``§ N``: passages are labelled so, the answer's
instructions ask for it, and the citation checker checks ``§`` references against the
sections that exist as it does pages (and leaves a PDF's quoted ``§ 12`` of a law alone)."""

import asyncio

import pytest

from chat.documents import retrieval
from chat.documents.citations import CitationChecker, CitationStream, check_citations
from chat.documents.retrieval import Passage, split_passages
from chat.models import Document

SECTIONS = {
    1: "§ 1\nIntroduction to the report.",
    2: "§ 2 Harbour lights\nThe lighthouse keeper lit the lamp every night of the year.",
    3: "§ 3 Budget\nThe council approved a budget that grew by ten percent.",
}


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("The lamp was lit (§ 12).", "The lamp was lit."),
        ("The lamp was lit [report.docx, § 40].", "The lamp was lit."),
        ("Both (§§ 2-9).", "Both (§§ 2–3)."),
        ("Kept (§ 2) and (§§ 1–3).", "Kept (§ 2) and (§§ 1–3)."),
        ("The lamp, see §7.", "The lamp."),
        ("A confused page citation (p. 30).", "A confused page citation."),
    ],
)
def test_section_citations_are_checked_against_the_sections_of_the_part(written, shown):
    assert check_citations(written, SECTIONS.keys(), SECTIONS, sectioned=True) == shown


def test_a_wrong_section_is_corrected_when_the_sentence_matches_another_section():
    checker = CitationChecker(SECTIONS.keys(), SECTIONS, SECTIONS.keys(), SECTIONS)
    text = checker.check("The lighthouse keeper lit the lamp every night (§ 9).")
    assert text == "The lighthouse keeper lit the lamp every night (§ 2)."
    assert checker.corrected == 1


def test_a_pdf_answer_quoting_a_law_section_keeps_it():
    assert check_citations("Under § 812 the buyer pays (p. 2).", [1, 2]) == "Under § 812 the buyer pays (p. 2)."


def test_a_streamed_answer_never_shows_an_invented_section_however_it_is_cut():
    answer = "The lamp (§ 2) was lit (§ 17) and the budget grew (§§ 3-44). Done."
    for size in (1, 2, 5):
        stream = CitationStream(CitationChecker([], None, SECTIONS.keys(), SECTIONS))
        shown = "".join(stream.feed(answer[i : i + size]) for i in range(0, len(answer), size)) + stream.finish()
        assert "17" not in shown and "44" not in shown, (size, shown)
        assert "(§ 2)" in shown and "(§ 3)" in shown, (size, shown)


def test_section_passages_and_instructions_say_section():
    passages = split_passages("report.docx", 2, SECTIONS[2], sectioned=True)
    assert passages[0].render().startswith("[report.docx, § 2]\n")
    assert Passage("scan.pdf", 4, "text").render().startswith("[scan.pdf, p. 4]\n")
    docx, pdf = Document(kind=Document.Kind.DOCX), Document(kind=Document.Kind.PDF)
    assert "(§ N)" in retrieval.instructions_for([docx]) and "(p. N)" not in retrieval.instructions_for([docx])
    assert "(p. N)" in retrieval.instructions_for([pdf]) and "§" not in retrieval.instructions_for([pdf])
    both = retrieval.instructions_for([pdf, docx])
    assert "(p. N)" in both and "(§ N)" in both


def test_an_answer_checker_knows_a_conversations_pages_and_sections_apart(monkeypatch):
    monkeypatch.setattr(retrieval, "_document_pages", lambda _id: ({1: "a page", 2: "b page"}, {5: "a section"}, {}))
    checker = asyncio.run(retrieval.answer_citation_checker(None))
    assert checker.check("One (p. 5) two (§ 5) three (§ 2) four (p. 2).") == "One two (§ 5) three four (p. 2)."
    monkeypatch.setattr(retrieval, "_document_pages", lambda _id: ({}, {1: "a section", 2: "b"}, {}))
    only_sections = asyncio.run(retrieval.answer_citation_checker(None))
    assert only_sections.check("A (§ 2) b (p. 2) c (§ 3).") == "A (§ 2) b (p. 2) c."
