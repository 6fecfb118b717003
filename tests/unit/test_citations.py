"""Page citations a model wrote are checked against the pages of the part they came from;
echoed instructions and copied parts are found by shared runs of words."""

from __future__ import annotations

import pytest

from chat.documents.citations import CitationChecker, CitationStream, check_citations, pages_of_marked_text
from chat.documents.overlap import copied_share, strip_echo
from chat.documents.summary_review import COPIED_PROMPT, COPIED_SOURCE, REDUCE_SYSTEM, review

PAGES = {
    3: "The river flows through the old town and floods the market every spring.",
    4: "The council approved a budget that grew by ten percent across all regions.",
    5: "Staff numbers stayed the same.",
}


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("Floods come yearly [p. 12].", "Floods come yearly."),
        ("Floods come yearly (p. 201).", "Floods come yearly."),
        ("Floods come yearly (pp. 30–41).", "Floods come yearly."),
        ("Budget points, see page 12.", "Budget points."),
        ("As shown on pages 40 to 45, it grew.", "As shown, it grew."),
        ("预算增加（第12页）。", "预算增加。"),
        ("Read [Report.pdf, p. 30] again.", "Read again."),
        ("Floods [pp. 4-21].", "Floods [pp. 4–5]."),
        ("Both (pp. 3, 9).", "Both (p. 3)."),
    ],
)
def test_a_citation_outside_the_part_is_removed_or_clipped_to_its_pages(written, shown):
    assert check_citations(written, PAGES.keys()) == shown


@pytest.mark.parametrize(
    "written",
    ["Floods (p. 3).", "Budget [pp. 3-5].", "On page 4 it grew.", "预算（第4页）。", "[Report.pdf, p. 5]", "pp. 3, 5"],
)
def test_a_citation_inside_the_part_is_kept_as_written(written):
    assert check_citations(written, PAGES.keys()) == written


def test_a_wrong_page_is_corrected_when_the_sentence_matches_another_page_of_the_part():
    checker = CitationChecker(PAGES.keys(), PAGES)
    text = checker.check("The budget grew by ten percent across all regions (p. 7). The end [p. 99].")
    assert text == "The budget grew by ten percent across all regions (p. 4). The end."
    assert (checker.corrected, checker.removed) == (1, 1)


def test_a_streamed_answer_never_shows_an_invented_page_however_it_is_cut():
    answer = "The river floods (p. 12). The budget grew (pp. 4-5) and see page 40 too. 预算（第90页）好。Done."
    expected = check_citations(answer, PAGES.keys())
    for size in (1, 2, 3, 7):
        stream = CitationStream(CitationChecker(PAGES.keys()))
        shown = "".join(stream.feed(answer[i : i + size]) for i in range(0, len(answer), size)) + stream.finish()
        assert "12" not in shown and "40" not in shown and "90" not in shown, (size, shown)
        assert shown.replace(" ", "") == expected.replace(" ", ""), (size, shown)


def test_text_without_citations_streams_without_being_held_back():
    stream = CitationStream(CitationChecker(PAGES.keys()))
    assert stream.feed("People hope to plan. ") == "People hope to plan. "
    assert stream.feed("Next, ") + stream.finish() == "Next, "


def test_pages_are_read_from_the_markers_of_a_chunk():
    pages = pages_of_marked_text("[p. 3]\nfirst page\n\n[p. 4]\nsecond page")
    assert sorted(pages) == [3, 4] and "second page" in pages[4]


def test_an_echoed_reduce_prompt_is_taken_out_and_named():
    instructions = REDUCE_SYSTEM.format(language="English") + "\nSummaries of parts, pp. 1–30:"
    output = (
        "You combine the summaries of consecutive parts of one document into one summary in English. "
        "Summaries of parts, pp. 1–30:\nThe river floods the market (p. 3). The budget grew (p. 4)."
    )
    text, share = strip_echo(output, instructions)
    assert text == "The river floods the market (p. 3). The budget grew (p. 4)."
    assert share > 0.5 and review(output, instructions, "").note == COPIED_PROMPT  # mostly the prompt
    longer = output + " Staff numbers stayed the same, while the council met in every region twice (p. 5)." * 2
    assert review(longer, instructions, "").note == ""  # one echoed sentence: taken out, not a copy
    assert "You combine" not in review(longer, instructions, "").text


def test_a_part_that_copies_its_source_is_named():
    source = " ".join(PAGES.values())
    assert copied_share(PAGES[3] + " " + PAGES[4], source) == 1.0
    assert review(PAGES[3] + " " + PAGES[4], "Summarize this.", source).note == COPIED_SOURCE
    own_words = "Spring floods hit the market; the council raised spending by a tenth (p. 4)."
    assert review(own_words, "Summarize this.", source).note == ""


def test_a_sentence_that_only_shares_common_words_with_a_page_is_not_corrected_to_it():
    checker = CitationChecker(PAGES.keys(), PAGES)
    claim = (
        "Every year the river flows through the old town, and later the mayor and the people of the region "
        "meet to plan new bridges, roads, schools, parks, libraries and many other public works"
    )
    assert checker.check(f"{claim} (p. 70).") == f"{claim}."
    assert (checker.corrected, checker.removed) == (0, 1)


OCR = {4: "read by OCR"}


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("The budget grew (p. 4).", "The budget grew (p. 4, read by OCR)."),
        ("The budget grew [Report.pdf, p. 4].", "The budget grew [Report.pdf, p. 4, read by OCR]."),
        ("See page 4 for the budget.", "See page 4 (read by OCR) for the budget."),
        ("预算增加（第4页）。", "预算增加（第4页, read by OCR）。"),
        ("Floods (p. 3).", "Floods (p. 3)."),  # a page with a text layer: no mark
        ("Both (pp. 3-5).", "Both (pp. 3-5, p. 4 read by OCR)."),  # only the pages that were
        ("Copied (p. 4, read by OCR).", "Copied (p. 4, read by OCR)."),  # the model copied the mark: once
        ("Copied on p. 4 (read by OCR).", "Copied on p. 4 (read by OCR)."),
        ("Invented (p. 40).", "Invented."),
    ],
)
def test_a_citation_of_a_page_read_by_ocr_says_so(written, shown):
    assert CitationChecker(PAGES.keys(), page_marks=OCR).check(written) == shown


def test_a_corrected_citation_is_marked_for_the_page_it_now_names():
    checker = CitationChecker(PAGES.keys(), PAGES, page_marks=OCR)
    assert checker.check("The council approved a budget that grew by ten percent (p. 9).") == (
        "The council approved a budget that grew by ten percent (p. 4, read by OCR)."
    )


def test_a_streamed_citation_of_a_scanned_page_is_marked_once_however_it_is_cut():
    written = "The budget grew (p. 4). Floods come (p. 3). More on page 4."
    for size in range(1, 12):
        stream = CitationStream(CitationChecker(PAGES.keys(), page_marks=OCR))
        shown = "".join(stream.feed(written[i : i + size]) for i in range(0, len(written), size)) + stream.finish()
        assert shown == "The budget grew (p. 4, read by OCR). Floods come (p. 3). More on page 4 (read by OCR).", size
