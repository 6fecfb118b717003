"""Forms at the border: every field a page posts is parsed and checked here, before a service sees it.

Their messages are the services' own, so a refusal reads the same wherever it is made.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from chat.conversations.presets import SYSTEM_PROMPT_MAX_CHARS, preset_choices
from chat.conversations.services import THINKING_BUDGET_MAX
from chat.documents.languages import language_choices

UNKNOWN_LANGUAGE = gettext_lazy("Unknown summary language.")
BAD_BUDGET = gettext_lazy("The thinking budget must be between 0 and 1000000 tokens.")
CHOOSE_MODE = gettext_lazy("Choose whether to replace the later messages or keep them.")


def first_error(form: forms.Form) -> str:
    """The message of the form's first refused field (forms here show one message at a time)."""
    return next(str(message) for messages in form.errors.values() for message in messages)


class ThinkingForm(forms.Form):
    thinking = forms.BooleanField(required=False)
    thinking_budget = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=THINKING_BUDGET_MAX,
        error_messages={"invalid": BAD_BUDGET, "min_value": BAD_BUDGET, "max_value": BAD_BUDGET},
    )


class ToolsForm(forms.Form):
    tools = forms.BooleanField(required=False)


class RenameForm(forms.Form):
    # Spaces are collapsed and the length checked by the service (a new chat's title gets the same).
    title = forms.CharField(required=False, strip=False)


class UploadForm(forms.Form):
    # Empty files pass here: the upload check names that with the other reasons a file is refused.
    file = forms.FileField(allow_empty_file=True, error_messages={"required": gettext_lazy("Choose a file to upload.")})
    conversation = forms.CharField(required=False)  # none: the document starts a new conversation
    password = forms.CharField(required=False, strip=False)
    language = forms.ChoiceField(
        required=False, choices=language_choices, error_messages={"invalid_choice": UNKNOWN_LANGUAGE}
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > settings.DOCUMENT_MAX_BYTES:  # refused before a byte of it is read
            raise ValidationError(
                _("The file is too large: the limit is %(mb)d MB.") % {"mb": settings.DOCUMENT_MAX_BYTES // 1_048_576}
            )
        return upload


class SummarizeForm(forms.Form):
    language = forms.ChoiceField(
        required=False, choices=language_choices, error_messages={"invalid_choice": UNKNOWN_LANGUAGE}
    )

    def clean_language(self) -> str | None:
        # Not sent: summarize again in the language chosen before; "": the document's own.
        return self.cleaned_data["language"] if "language" in self.data else None


BAD_PRESET = gettext_lazy("Unknown sampling preset.")


class PromptSettingsForm(forms.Form):
    system_prompt = forms.CharField(required=False, max_length=SYSTEM_PROMPT_MAX_CHARS)
    preset = forms.ChoiceField(required=False, choices=preset_choices, error_messages={"invalid_choice": BAD_PRESET})

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["system_prompt"].error_messages["max_length"] = ngettext(
            "A system prompt can have at most %(limit)d character.",
            "A system prompt can have at most %(limit)d characters.",
            SYSTEM_PROMPT_MAX_CHARS,
        ) % {"limit": SYSTEM_PROMPT_MAX_CHARS}


class EditQuestionForm(forms.Form):
    # Emptiness and length are checked by the service with the socket's own messages.
    text = forms.CharField(required=False)
    mode = forms.ChoiceField(
        choices=[("replace", "replace"), ("keep", "keep")],
        error_messages={"required": CHOOSE_MODE, "invalid_choice": CHOOSE_MODE},
    )


class BulkDeleteForm(forms.Form):
    """The ids checked in the list; only the person's own conversations are choices."""

    ids = forms.MultipleChoiceField(
        error_messages={
            "required": gettext_lazy("Choose at least one conversation."),
            "invalid_choice": gettext_lazy("One of the chosen conversations does not exist."),
        }
    )

    def __init__(self, *args, own_ids: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["ids"].choices = [(conversation_id, conversation_id) for conversation_id in own_ids]
