"""What a turn sends the model from the conversation: its history as OpenAI-shaped messages, and the
sampling options a person's client may set (an allowlist)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

from chat.conversations.selectors import image_data_url
from chat.errors import ChatError
from chat.models import Message


def build_messages(history: list[Message]) -> list[dict]:
    """OpenAI-shaped messages; roles alternate (consecutive ones are merged)."""
    result: list[dict] = []
    for message in history:
        if message.role == Message.Role.ASSISTANT and not message.content:
            continue  # failed or empty answers carry nothing to continue from
        parts: list[dict] = []
        if message.content:
            parts.append({"type": "text", "text": message.content})
        if message.image_type:
            parts.append({"type": "image_url", "image_url": {"url": image_data_url(message)}})
        if result and result[-1]["role"] == message.role:
            result[-1]["_parts"].extend(parts)
        else:
            result.append({"role": message.role, "_parts": parts})
    for item in result:
        parts = item.pop("_parts")
        if all(part["type"] == "text" for part in parts):
            item["content"] = "\n\n".join(part["text"] for part in parts)
        else:
            item["content"] = parts
    return result


def has_images(messages: list[dict]) -> bool:
    return any(isinstance(message["content"], list) for message in messages)


def sampling_options(raw: Any) -> dict:
    """Per-message sampling options a client may set; everything else is refused."""
    if raw in (None, {}):
        return {}
    if not isinstance(raw, dict):
        raise ChatError(_("Options must be an object."))
    options: dict = {}
    for key, value in raw.items():
        if key == "seed" and isinstance(value, int) and 0 <= value < 2**32:
            options["seed"] = value
        elif key == "max_tokens" and isinstance(value, int) and 1 <= value <= settings.CHAT_MAX_ANSWER_TOKENS:
            options["max_tokens"] = value
        elif key == "temperature" and isinstance(value, (int, float)) and 0 <= value <= 2:
            options["temperature"] = float(value)
        else:
            raise ChatError(_("Unsupported option: %(name)s") % {"name": str(key)[:40]})
    return options
