"""The final summary as the person reads it: the combined summary, then each part's own summary
under its pages, so every point can be traced to them."""

from __future__ import annotations

from django.utils.translation import gettext as _

from chat.documents.summary_review import note_text
from chat.models import DocumentChunk


def compose(final: DocumentChunk, sections: list[DocumentChunk]) -> str:
    """The combined summary, then each part's own summary under its pages, so every point can be traced.
    A part still copied when asked again carries its note."""
    lines = [final.summary.strip()]
    if final.note:
        lines += ["", "> " + note_text(final.note, final.pages_label)]
    if len(sections) == 1:
        return "\n".join([*lines, "", f"*({sections[0].pages_label})*"])
    lines += ["", "### " + _("By section")]
    for section in sections:
        note = f" *{note_text(section.note, section.pages_label)}*" if section.note else ""
        lines.append(f"- **{section.pages_label}**: " + " ".join(section.summary.split()) + note)
    return "\n".join(lines)
