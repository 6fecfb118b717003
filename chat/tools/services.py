"""Writes of the tool loop: a conversation's tools switch and an answer's tool steps."""

from __future__ import annotations

from django.utils import timezone
from django.utils.translation import gettext as _

from chat.errors import NotFound
from chat.models import Conversation, Message


def set_tools_enabled(user, conversation_id, enabled: bool) -> Conversation:
    conversation = Conversation.objects.filter(owner=user, pk=conversation_id).first()
    if conversation is None:
        raise NotFound(_("This conversation does not exist."))
    conversation.tools_enabled = enabled
    conversation.save(update_fields=["tools_enabled", "updated_at"])
    return conversation


def save_tool_steps(message_id: int, steps: list[dict]) -> None:
    """The answer's steps as they stand (each change of a step writes them all: a turn has a handful)."""
    Message.objects.filter(id=message_id).update(tool_steps=steps, updated_at=timezone.now())


UNFINISHED = ("running", "waiting")


def end_unfinished_steps(message_id: int, steps: list[dict]) -> None:
    """An interrupted answer's steps left running or waiting (its web process died): stopped, saying so.
    The step that ran may have done its work; the person reads that it is not known."""
    if not any(step.get("state") in UNFINISHED for step in steps):
        return
    for step in steps:
        if step.get("state") in UNFINISHED:
            step["state"] = "stopped"
            step["result"] = _("The server restarted before this tool call finished; whether it ran is not known.")
    Message.objects.filter(id=message_id).update(tool_steps=steps)
