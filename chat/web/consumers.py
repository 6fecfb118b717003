"""The chat WebSocket: parse frames, call services, forward the turn's events."""

from __future__ import annotations

import asyncio
import json
import logging

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.utils.translation import gettext as _

from chat.conversations import images, services
from chat.conversations.selectors import conversation_history, get_conversation, message_payload
from chat.conversations.turns import TurnRunner, turn_options
from chat.errors import ChatError
from chat.models import Message

log = logging.getLogger(__name__)


def max_frame_chars() -> int:
    return settings.CHAT_MAX_FRAME_CHARS


class ChatConsumer(AsyncJsonWebsocketConsumer):
    # Events go straight to this socket, never through the channel layer: without one, a Redis
    # restart does not close every open chat page mid-answer (Channels ends the consumer with 1011).
    channel_layer_alias = None

    @classmethod
    async def encode_json(cls, content) -> str:
        # Every streamed token goes through here; orjson keeps that cheap.
        return orjson.dumps(content, default=str).decode()

    async def connect(self):
        self.user = self.scope.get("user")
        if not self.user or not self.user.is_authenticated:
            await self.close(code=4401)
            return
        self.runners: dict[str, TurnRunner] = {}
        await self.accept()

    async def disconnect(self, code):
        for runner in getattr(self, "runners", {}).values():
            runner.stop(Message.Status.INCOMPLETE, _("The page was closed before the answer was finished."))

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        if text_data is None or len(text_data) > max_frame_chars():
            await self._error(
                _("The message is too large: text is limited to %(chars)d characters and images to %(mb).0f MB.")
                % {"chars": settings.CHAT_MAX_MESSAGE_CHARS, "mb": settings.CHAT_MAX_IMAGE_BYTES / 1_048_576}
            )
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            await self._error(_("The message could not be read."))
            return
        if not isinstance(content, dict):
            await self._error(_("The message could not be read."))
            return
        await self.receive_json(content)

    async def receive_json(self, content, **kwargs):
        handlers = {
            "send": self.on_send,
            "stop": self.on_stop,
            "regenerate": self.on_regenerate,
            "history": self.on_history,
        }
        handler = handlers.get(content.get("type"))
        if handler is None:
            await self._error(_("Unknown request."))
            return
        try:
            await handler(content)
        except ChatError as error:
            await self._error(str(error), content.get("conversation"))

    async def _error(self, message: str, conversation=None) -> None:
        await self.send_json({"type": "error", "message": message, "conversation": conversation})

    async def on_send(self, content: dict) -> None:
        text = content.get("text") or ""
        if not isinstance(text, str):
            raise ChatError(_("The message could not be read."))
        text = text.strip()
        if len(text) > settings.CHAT_MAX_MESSAGE_CHARS:
            raise ChatError(
                _("The message is too long: the limit is %(chars)d characters.")
                % {"chars": settings.CHAT_MAX_MESSAGE_CHARS}
            )
        image = None
        if content.get("image"):
            # Decoding and scaling is CPU work: keep it off the event loop that streams tokens.
            image = await asyncio.to_thread(images.normalize_image, images.decode_data_url(content["image"]))
        if not text and not image:
            raise ChatError(_("The message is empty."))
        options = turn_options(content.get("options"))
        conversation_id = content.get("conversation")
        if conversation_id:
            self._ensure_idle(str(conversation_id))
        conversation, user_message, assistant = await database_sync_to_async(services.post_to_conversation)(
            self.user, conversation_id, text, image, content.get("profile")
        )
        await self.send_json(
            {
                "type": "accepted",
                "conversation": str(conversation.id),
                "title": conversation.display_title,
                "user_message": message_payload(user_message),
                "assistant_message": message_payload(assistant),
            }
        )
        self._start(conversation, assistant.id, options)

    async def on_regenerate(self, content: dict) -> None:
        conversation = await database_sync_to_async(get_conversation)(self.user, content.get("conversation"))
        self._ensure_idle(str(conversation.id))
        assistant = await database_sync_to_async(services.prepare_regenerate)(conversation)
        await self.send_json(
            {
                "type": "accepted",
                "conversation": str(conversation.id),
                "title": conversation.display_title,
                "assistant_message": message_payload(assistant),
                "regenerate": True,
            }
        )
        self._start(conversation, assistant.id, turn_options(content.get("options")))

    async def on_history(self, content: dict) -> None:
        """The conversation's messages as stored: a page that reconnects shows what became of its answers."""
        conversation = await database_sync_to_async(get_conversation)(self.user, content.get("conversation"))
        messages = await database_sync_to_async(conversation_history)(conversation)
        await self.send_json({"type": "history", "conversation": str(conversation.id), "messages": messages})

    async def on_stop(self, content: dict) -> None:
        runner = self.runners.get(str(content.get("conversation")))
        if runner:
            runner.stop(Message.Status.STOPPED)

    def _ensure_idle(self, conversation_id: str) -> None:
        runner = self.runners.get(conversation_id)
        if runner and runner.task and not runner.task.done():
            raise ChatError(_("Wait for the current answer to finish, or stop it."))

    def _start(self, conversation, assistant_id: int, options: dict) -> None:
        key = str(conversation.id)
        runner = TurnRunner(
            conversation=conversation,
            assistant_id=assistant_id,
            user_key=str(self.user.pk),
            send=self.send_json,
            options=options,
        )
        self.runners[key] = runner
        runner.start().add_done_callback(
            lambda _task: self.runners.pop(key, None) if self.runners.get(key) is runner else None
        )
