"""Edit an earlier question and ask again from there.

Two visible choices: replace (the question is changed in place and every later message is
deleted) or keep (a copy of the conversation up to the edited question is made, the original
stays as it was). Either way the page then starts the answer with the socket's "regenerate".
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.conversations.selectors import get_conversation
from chat.conversations.services import TITLE_MAX
from chat.errors import ChatError, NotFound
from chat.models import Conversation, Message

COPIED_SETTINGS = (
    "profile",
    "thinking_enabled",
    "thinking_budget",
    "system_prompt",
    "sampling_preset",
    "tools_enabled",
)
COPIED_FIELDS = ("role", "content", "reasoning", "status", "error", "stats", "image", "image_type")


def clean_question(text: str) -> str:
    text = (text or "").strip()
    if not text:
        raise ChatError(_("The message is empty."))
    return check_length(text)


def check_length(text: str) -> str:
    if len(text) > settings.CHAT_MAX_MESSAGE_CHARS:
        raise ChatError(
            ngettext(
                "The message is too long: the limit is %(chars)d character.",
                "The message is too long: the limit is %(chars)d characters.",
                settings.CHAT_MAX_MESSAGE_CHARS,
            )
            % {"chars": settings.CHAT_MAX_MESSAGE_CHARS}
        )
    return text


def edit_question(user, conversation_id, message_id: int, text: str, *, keep_later: bool) -> Conversation:
    """The conversation whose last message is now the edited question, waiting for its answer."""
    text = clean_question(text)
    conversation = get_conversation(user, conversation_id)
    question = conversation.messages.filter(id=message_id, role=Message.Role.USER).first()
    if question is None:
        raise NotFound(_("This message does not exist."))
    if conversation.messages.filter(status=Message.Status.STREAMING).exists():
        raise ChatError(_("An answer is still being written."))
    if keep_later:
        return _fork(conversation, question, text)
    with transaction.atomic():
        conversation.messages.filter(id__gt=question.id).delete()
        question.content = text
        question.save(update_fields=["content", "updated_at"])
        conversation.save(update_fields=["updated_at"])
    return conversation


@transaction.atomic
def _fork(conversation: Conversation, question: Message, text: str) -> Conversation:
    title = _("%(title)s (edited)") % {"title": conversation.display_title}
    copy = Conversation.objects.create(
        owner=conversation.owner,
        title=title[:TITLE_MAX],
        **{field: getattr(conversation, field) for field in COPIED_SETTINGS},
    )
    copy.collections.set(conversation.collections.all())  # readable ones are chosen again at each turn
    earlier = conversation.messages.filter(id__lt=question.id).order_by("created_at", "id")
    for message in earlier:
        Message.objects.create(conversation=copy, **{field: getattr(message, field) for field in COPIED_FIELDS})
    Message.objects.create(
        conversation=copy,
        role=Message.Role.USER,
        content=text,
        image=question.image,
        image_type=question.image_type,
    )
    return copy
