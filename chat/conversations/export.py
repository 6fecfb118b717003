"""A conversation as a file to download: Markdown for people, JSON for programs.

What the model wrote goes out as the text it is (Markdown source), never rendered to HTML."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from django.utils.text import slugify
from django.utils.translation import gettext as _

from chat.conversations.presets import PRESETS
from chat.models import Conversation, Message

EXPORT_FORMAT = "qwenweb-conversation"
EXPORT_VERSION = 1


def _messages(conversation: Conversation):
    return conversation.messages.defer("image").order_by("created_at", "id")


def export_json(conversation: Conversation) -> dict[str, Any]:
    return {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "id": str(conversation.id),
        "title": conversation.title,
        "created_at": conversation.created_at.isoformat(),
        "updated_at": conversation.updated_at.isoformat(),
        "exported_at": timezone.now().isoformat(),
        "profile": conversation.profile.name if conversation.profile_id else None,
        "system_prompt": conversation.system_prompt,
        "sampling_preset": conversation.sampling_preset or None,
        "sampling": PRESETS.get(conversation.sampling_preset, {}),
        "messages": [
            {
                "role": message.role,
                "content": message.content,
                "reasoning": message.reasoning,
                "status": message.status,
                "error": message.error,
                "created_at": message.created_at.isoformat(),
                "stats": message.stats,
                "image_type": message.image_type or None,
                "tool_steps": message.tool_steps or [],
            }
            for message in _messages(conversation)
        ],
    }


def _quoted(text: str) -> str:
    return "\n".join("> " + line for line in text.splitlines())


def _tool_step(step: dict) -> str:
    heading = _("Tool %(name)s (%(state)s)") % {"name": step.get("name", ""), "state": step.get("state", "")}
    arguments = _quoted(_("Arguments: %(arguments)s") % {"arguments": step.get("arguments", "")})
    return f"**{heading}**\n\n{arguments}\n\n{_quoted(step.get('result', ''))}"


def export_markdown(conversation: Conversation) -> str:
    exported = _("Exported from qwenweb on %(date)s.") % {"date": timezone.now().strftime("%Y-%m-%d %H:%M UTC")}
    parts = [f"# {conversation.display_title}", "", exported, ""]
    if conversation.system_prompt:
        parts += [f"**{_('System prompt')}**", "", _quoted(conversation.system_prompt), ""]
    for message in _messages(conversation):
        heading = _("You") if message.role == Message.Role.USER else _("Assistant")
        parts += [f"## {heading}", ""]
        if message.image_type:
            parts += [_("[an image was attached]"), ""]
        if message.reasoning:
            parts += [f"**{_('Thinking')}**", "", _quoted(message.reasoning), ""]
        for step in message.tool_steps or ():
            parts += [_tool_step(step), ""]
        parts += [message.content, ""]
        if message.status not in (Message.Status.COMPLETE, Message.Status.STREAMING) or message.error:
            parts += [f"*{message.get_status_display()}*" + (f": {message.error}" if message.error else ""), ""]
    return "\n".join(parts).rstrip() + "\n"


def export_filename(conversation: Conversation, extension: str) -> str:
    """A name from the title (Chinese kept: the header gives it in its UTF-8 form too)."""
    base = slugify(conversation.title, allow_unicode=True)[:60] or "conversation"
    return f"{base}-{str(conversation.id)[:8]}.{extension}"
