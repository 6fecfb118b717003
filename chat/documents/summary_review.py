"""What a summary step wrote, reviewed before it is kept: the instructions it echoed are
taken out, and a part that is mostly a copy of its prompt or of its source is named (its page
citations are then checked against the pages of the part, ``citations.check_citations``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext as _

from chat.documents.overlap import copied_share, strip_echo

COPIED_PROMPT = "copied_prompt"
COPIED_SOURCE = "copied_source"
# Shares of the output above which it is a copy rather than a summary.
PROMPT_COPY_SHARE = 0.5
SOURCE_COPY_SHARE = 0.6

MAP_SYSTEM = (
    "You summarize one part of a longer document. Each page of the text starts with a marker like [p. 12]. "
    "Write a concise summary of the main points of this part in {language}. "
    "After each point, cite the page it comes from as (p. N)."
)
REDUCE_SYSTEM = (
    "You combine the summaries of consecutive parts of one document into one summary in {language}. "
    "Each part starts with its pages, like (pp. 3-9). Keep the main points and their page citations (p. N)."
)
# Asked once more when the first answer was mostly a copy: other words, the same task.
RETRY_SYSTEM = (
    "Read the text the user sends and report, in {language} and in your own words, what it is about: "
    "its main facts, decisions and figures, in a few short bullet points. Do not repeat these instructions "
    "and do not copy sentences from the text. End each point with its page as (p. N)."
)


@dataclass(frozen=True)
class Review:
    text: str
    note: str  # "", COPIED_PROMPT or COPIED_SOURCE


def review(output: str, instructions: str, source: str) -> Review:
    """The output without its echo of the instructions, and whether it is mostly a copy."""
    text, echoed = strip_echo(output, instructions)
    if not text or echoed >= PROMPT_COPY_SHARE:
        return Review(text, COPIED_PROMPT)
    if copied_share(text, source) >= SOURCE_COPY_SHARE:
        return Review(text, COPIED_SOURCE)
    return Review(text, "")


def note_text(note: str, pages_label: str) -> str:
    """The note shown on a summary whose part was still a copy when asked again."""
    if note == COPIED_PROMPT:
        return _(
            "Note: for %(pages)s the model repeated its instructions instead of summarizing, even when asked "
            "again. This part of the summary may be missing points."
        ) % {"pages": pages_label}
    if note == COPIED_SOURCE:
        return _(
            "Note: for %(pages)s the model copied the document's text instead of summarizing it, even when "
            "asked again. Read those pages themselves."
        ) % {"pages": pages_label}
    return ""
