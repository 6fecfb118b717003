"""Conversations and messages: reads and writes, each scoped to its owner."""

from __future__ import annotations

import base64
import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from chat.errors import ChatError, NotFound
from chat.models import Conversation, Message
from monitor.public import ProfileUnavailable, find_profile, user_profiles

TITLE_MAX = 200


def list_conversations(user) -> list[Conversation]:
    return list(Conversation.objects.filter(owner=user).only("id", "title", "updated_at"))


def get_conversation(user, conversation_id) -> Conversation:
    """The user's own conversation; anything else is NotFound, whoever owns it."""
    try:
        return Conversation.objects.get(id=uuid.UUID(str(conversation_id)), owner=user)
    except (Conversation.DoesNotExist, ValueError) as error:
        raise NotFound(_("This conversation does not exist.")) from error


def create_conversation(user, title: str = "") -> Conversation:
    return Conversation.objects.create(owner=user, title=clean_title(title))


def clean_title(title: str) -> str:
    title = " ".join((title or "").split())
    if len(title) > TITLE_MAX:
        raise ChatError(_("A title can have at most %(limit)d characters.") % {"limit": TITLE_MAX})
    return title


def rename_conversation(user, conversation_id, title: str) -> Conversation:
    conversation = get_conversation(user, conversation_id)
    conversation.title = clean_title(title)
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def delete_conversation(user, conversation_id) -> None:
    get_conversation(user, conversation_id).delete()


def update_thinking(user, conversation_id, *, enabled: bool, budget: int | None) -> Conversation:
    conversation = get_conversation(user, conversation_id)
    if budget is not None and not (0 <= budget <= 1_000_000):
        raise ChatError(_("The thinking budget must be between 0 and 1000000 tokens."))
    conversation.thinking_enabled = enabled
    conversation.thinking_budget = budget
    conversation.save(update_fields=["thinking_enabled", "thinking_budget", "updated_at"])
    return conversation


@transaction.atomic
def post_user_message(
    conversation: Conversation, text: str, image: tuple[bytes, str] | None
) -> tuple[Message, Message]:
    """Store the user's message and an empty assistant message that will stream."""
    user_message = Message.objects.create(
        conversation=conversation,
        role=Message.Role.USER,
        content=text,
        image=image[0] if image else None,
        image_type=image[1] if image else "",
    )
    assistant = Message.objects.create(
        conversation=conversation, role=Message.Role.ASSISTANT, status=Message.Status.STREAMING
    )
    fields = ["updated_at"]
    if not conversation.title:
        conversation.title = " ".join(text.split())[:60] or _("Image")
        fields.append("title")
    conversation.save(update_fields=fields)
    return user_message, assistant


def post_to_conversation(
    user, conversation_id, text: str, image, profile_name: str | None = None
) -> tuple[Conversation, Message, Message]:
    """The user's message to their conversation, or to a new one when no id is given."""
    if conversation_id:
        conversation = get_conversation(user, conversation_id)
    else:
        conversation = create_conversation(user)
    if profile_name:
        choose_profile(conversation, profile_name)
    user_message, assistant = post_user_message(conversation, text, image)
    return conversation, user_message, assistant


def choose_profile(conversation: Conversation, profile_name: str) -> None:
    """Answer this conversation with another server profile (one the admin made available)."""
    if not isinstance(profile_name, str):
        raise ChatError(_("Unknown server profile."))
    try:
        profile = find_profile(profile_name, for_users=True)
    except ProfileUnavailable as error:
        raise ChatError(_("The server profile %(name)s is not available.") % {"name": profile_name[:64]}) from error
    if conversation.profile_id != profile.pk:
        conversation.profile = profile
        conversation.save(update_fields=["profile", "updated_at"])


def profile_choices() -> list[dict[str, Any]]:
    """What a user picks from: each available profile with its context per answer and image support."""
    choices = []
    for profile in user_profiles():
        choices.append(
            {
                "name": profile.name,
                "description": profile.description,
                "default": profile.is_default,
                "remote": profile.is_remote,
                # llama-server splits the context between its slots.
                "context": None if profile.is_remote else profile.ctx_size // max(profile.parallel, 1),
                "images": None if profile.is_remote else bool(profile.mmproj_file),
            }
        )
    return choices


@transaction.atomic
def prepare_regenerate(conversation: Conversation) -> Message:
    """Replace the last assistant answer with a fresh one that will stream."""
    last = conversation.messages.order_by("-created_at", "-id").first()
    if last is None:
        raise ChatError(_("There is nothing to regenerate yet."))
    if last.role == Message.Role.ASSISTANT:
        if last.status == Message.Status.STREAMING:
            raise ChatError(_("An answer is still being written."))
        last.delete()
    assistant = Message.objects.create(
        conversation=conversation, role=Message.Role.ASSISTANT, status=Message.Status.STREAMING
    )
    conversation.save(update_fields=["updated_at"])
    return assistant


def history_before(assistant_id: int) -> list[Message]:
    """The messages a new answer continues: everything before it, oldest first."""
    conversation_id = Message.objects.filter(id=assistant_id).values_list("conversation_id", flat=True)
    return list(
        Message.objects.filter(conversation_id__in=conversation_id, id__lt=assistant_id).order_by("created_at", "id")
    )


def save_progress(message_id: int, content: str, reasoning: str) -> None:
    Message.objects.filter(id=message_id).update(content=content, reasoning=reasoning, updated_at=timezone.now())


def finish_message(
    message_id: int, *, content: str, reasoning: str, status: str, error: str = "", stats: dict | None = None
) -> None:
    Message.objects.filter(id=message_id).update(
        content=content, reasoning=reasoning, status=status, error=error, stats=stats or {}, updated_at=timezone.now()
    )


def message_payload(message: Message) -> dict[str, Any]:
    return {
        "id": message.id,
        "role": message.role,
        "content": message.content,
        "reasoning": message.reasoning,
        "status": message.status,
        "error": message.error,
        "stats": message.stats,
        "image_url": reverse("chat:message-image", args=[message.id]) if message.image_type else None,
    }


def image_data_url(message: Message) -> str:
    return f"data:{message.image_type};base64," + base64.b64encode(bytes(message.image)).decode()


def get_message_image(user, message_id: int) -> tuple[bytes, str]:
    message = (
        Message.objects.filter(id=message_id, conversation__owner=user)
        .exclude(image_type="")
        .only("image", "image_type")
        .first()
    )
    if message is None:
        raise NotFound(_("This image does not exist."))
    return bytes(message.image), message.image_type


def mark_orphaned_streams(older_than_s: float) -> int:
    """Answers left 'streaming' by a process that died: keep their text, mark them incomplete."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    return Message.objects.filter(status=Message.Status.STREAMING, updated_at__lt=cutoff).update(
        status=Message.Status.INCOMPLETE,
        error=_("This answer was interrupted when the server restarted. The partial answer was kept."),
    )
