"""Reads of conversations and messages, each scoped to its owner."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from typing import Any

from django.urls import reverse
from django.utils.translation import gettext as _

from chat.accounts.profiles import conversation_profile_for, profiles_for
from chat.errors import NotFound
from chat.models import Conversation, Document, Message
from monitor.public import ServerProfile


def list_conversations(user) -> list[Conversation]:
    return list(Conversation.objects.filter(owner=user).only("id", "title", "updated_at"))


def own_conversation_ids(user) -> list[str]:
    return [str(pk) for pk in Conversation.objects.filter(owner=user).values_list("id", flat=True)]


def get_conversation(user, conversation_id) -> Conversation:
    """The user's own conversation; anything else is NotFound, whoever owns it."""
    try:
        return Conversation.objects.get(id=uuid.UUID(str(conversation_id)), owner=user)
    except (Conversation.DoesNotExist, ValueError) as error:
        raise NotFound(_("This conversation does not exist.")) from error


def history_before(assistant_id: int) -> list[Message]:
    """The messages a new answer continues: everything before it, oldest first."""
    conversation_id = Message.objects.filter(id=assistant_id).values_list("conversation_id", flat=True)
    return list(
        Message.objects.filter(conversation_id__in=conversation_id, id__lt=assistant_id).order_by("created_at", "id")
    )


@dataclass
class TurnInputs:
    history: list[Message]
    profile: ServerProfile | None  # the profile answering the conversation, when asked for
    has_documents: bool


def turn_inputs(assistant_id: int, conversation: Conversation, *, with_profile: bool) -> TurnInputs:
    """What a turn reads before its request, in one trip to a database thread: the history, the
    profile (``with_profile``) and whether documents are attached (their passages are read only then)."""
    return TurnInputs(
        history=history_before(assistant_id),
        profile=conversation_profile_for(conversation.owner_id, conversation.profile_id) if with_profile else None,
        has_documents=Document.objects.filter(conversation_id=conversation.id).exists(),
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
        "tool_steps": message.tool_steps or [],
        "image_url": reverse("chat:message-image", args=[message.id]) if message.image_type else None,
    }


def conversation_history(conversation: Conversation | None) -> list[dict[str, Any]]:
    """Every message of the conversation as the page shows it, oldest first."""
    if conversation is None:
        return []
    return [message_payload(message) for message in conversation.messages.all()]


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


def profile_choices(user_id: int) -> list[dict[str, Any]]:
    """What a person picks from: each profile they may use with its context per answer and image support."""
    return [
        {
            "name": profile.name,
            "description": profile.description,
            "default": profile.is_default,
            "remote": profile.is_remote,
            # llama-server splits the context between its slots.
            "context": None if profile.is_remote else profile.ctx_size // max(profile.parallel, 1),
            "images": None if profile.is_remote else bool(profile.mmproj_file),
        }
        for profile in profiles_for(user_id, ServerProfile.Kind.CHAT)
    ]


def current_profile_name(choices: list[dict[str, Any]], conversation: Conversation | None) -> str:
    """The profile that answers the conversation: its own while its owner may use it (it is among
    ``choices``, from ``profile_choices``), else their default one."""
    names = [choice["name"] for choice in choices]
    if conversation is not None and conversation.profile_id and conversation.profile.name in names:
        return conversation.profile.name
    default = next((choice for choice in choices if choice["default"]), choices[0] if choices else None)
    return default["name"] if default else ""


def model_names(user_id: int) -> list[str]:
    """The names of the profiles this person may use (their API's model ids)."""
    return list(profiles_for(user_id).values_list("name", flat=True))
