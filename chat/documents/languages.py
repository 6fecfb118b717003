"""The languages a summary may be written in: the one list, and the default for a document.

Each name is what the model is asked for (in English) and, translated, what people pick from.
"""

from __future__ import annotations

import re

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from chat.errors import DocumentError
from chat.models import Document

# Summary languages a user may pick ("" = the document's own).
LANGUAGES = {
    "en": gettext_noop("English"),
    "zh-hans": gettext_noop("Simplified Chinese"),
    "zh-hant": gettext_noop("Traditional Chinese"),
    "ja": gettext_noop("Japanese"),
    "ko": gettext_noop("Korean"),
    "fr": gettext_noop("French"),
    "de": gettext_noop("German"),
    "es": gettext_noop("Spanish"),
}


def language_choices() -> list[tuple[str, str]]:
    """What people pick from, in their own language; "" first: the document's own language."""
    return [("", _("Document's language")), *((code, _(name)) for code, name in LANGUAGES.items())]


def clean_language(language: str) -> str:
    language = (language or "").strip()
    if language and language not in LANGUAGES:
        raise DocumentError(_("Unknown summary language."))
    return language


def detect_language(text: str) -> str:
    """The language a summary should default to, from the scripts the text is written in."""
    sample = text[:20000]
    hangul = len(re.findall(r"[\uac00-\ud7af]", sample))
    kana = len(re.findall(r"[\u3040-\u30ff]", sample))
    han = len(re.findall(r"[\u4e00-\u9fff]", sample))
    latin = len(re.findall(r"[A-Za-z]", sample))
    if hangul > latin and hangul >= kana:
        return "ko"
    if kana and kana + han > latin:
        return "ja"
    if han > latin:
        return "zh-hans"
    return ""


def language_name(document: Document, sample: str) -> str:
    """The language to ask the model for, named in English."""
    code = document.summary_language or detect_language(sample)
    return LANGUAGES.get(code, "the same language as the document")
