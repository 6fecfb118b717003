"""The chat WebSocket: parse frames, call services; answers run apart from it (chat.conversations.runs).

One handler per message type (``receive_json``'s table): a new kind of request is one more entry.
The socket only watches a conversation: closing it leaves the answer running for the other pages.
"""

from __future__ import annotations

import asyncio
import json
import logging

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.conversations import images, services
from chat.conversations.editing import check_length
from chat.conversations.messages import sampling_options
from chat.conversations.runs import running_answers
from chat.conversations.selectors import (
    TurnInputs,
    conversation_history,
    get_conversation,
    message_payload,
    turn_inputs,
)
from chat.errors import ChatError
from chat.tools.approvals import approvals

log = logging.getLogger(__name__)


class ChatConsumer(AsyncJsonWebsocketConsumer):
    @classmethod
    async def encode_json(cls, content) -> str:
        # Every streamed frame goes through here; orjson keeps that cheap.
        return orjson.dumps(content, default=str).decode()

    async def connect(self):
        self.user = self.scope.get("user")
        if not self.user or not self.user.is_authenticated:
            await self.close(code=4401)
            return
        # Everything this socket sends goes through one sender, so it arrives in order.
        self.answers = running_answers()
        self.frames = self.answers.sender(self.send_json, self.user.pk)
        await self.accept()

    async def disconnect(self, code):
        frames = getattr(self, "frames", None)
        if frames is not None:
            self.answers.unwatch(frames)  # the answer goes on; the page can come back to it
            frames.close()

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        if text_data is None or len(text_data) > settings.CHAT_MAX_FRAME_CHARS:
            await self._error(
                ngettext(
                    "The message is too large: text is limited to %(chars)d character and images to %(mb).0f MB.",
                    "The message is too large: text is limited to %(chars)d characters and images to %(mb).0f MB.",
                    settings.CHAT_MAX_MESSAGE_CHARS,
                )
                % {"chars": settings.CHAT_MAX_MESSAGE_CHARS, "mb": settings.CHAT_MAX_IMAGE_BYTES / 1_048_576}
            )
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            content = None
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
            "subscribe": self.on_subscribe,
            "tool_decision": self.on_tool_decision,
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
        await self.frames.push({"type": "error", "message": message, "conversation": conversation})

    async def on_send(self, content: dict) -> None:
        text = content.get("text") or ""
        if not isinstance(text, str):
            raise ChatError(_("The message could not be read."))
        text = check_length(text.strip())
        image = None
        if content.get("image"):
            # Decoding and scaling is CPU work: keep it off the event loop that streams tokens.
            image = await asyncio.to_thread(images.normalize_image, images.decode_data_url(content["image"]))
        if not text and not image:
            raise ChatError(_("The message is empty."))
        options = sampling_options(content.get("options"))
        conversation_id = content.get("conversation")
        with self.answers.claim(str(conversation_id) if conversation_id else None, self.user.pk):
            conversation, user_message, assistant, inputs = await database_sync_to_async(_post)(
                self.user, conversation_id, text, image, content.get("profile")
            )
            accepted = {"type": "accepted", "user_message": message_payload(user_message)}
            await self._start(conversation, assistant, options, accepted, inputs)

    async def on_regenerate(self, content: dict) -> None:
        conversation = await database_sync_to_async(get_conversation)(self.user, content.get("conversation"))
        with self.answers.claim(str(conversation.id), self.user.pk):
            assistant, inputs = await database_sync_to_async(_regenerate)(conversation)
            accepted = {"type": "accepted", "regenerate": True}
            await self._start(conversation, assistant, sampling_options(content.get("options")), accepted, inputs)

    async def on_history(self, content: dict) -> None:
        """The conversation's messages as stored: a page that reconnects shows what became of its answers."""
        conversation = await database_sync_to_async(get_conversation)(self.user, content.get("conversation"))
        messages = await database_sync_to_async(conversation_history)(conversation)
        await self.frames.push({"type": "history", "conversation": str(conversation.id), "messages": messages})

    async def on_subscribe(self, content: dict) -> None:
        """This page shows the conversation: its running answer so far, then live (``history``: stored messages first)."""
        conversation = await database_sync_to_async(get_conversation)(self.user, content.get("conversation"))
        # Live text that comes while the stored messages are read waits behind them and the snapshot.
        self.frames.hold()
        first: list[dict] = []
        try:
            opening = self.answers.watch(self.frames, conversation)
            if content.get("history"):
                messages = await database_sync_to_async(conversation_history)(conversation)
                first.append({"type": "history", "conversation": str(conversation.id), "messages": messages})
            first += opening
        finally:
            await self.frames.release(first)

    async def on_stop(self, content: dict) -> None:
        """Stop works from any page of the conversation's owner, not only the one that asked."""
        self.answers.stop(str(content.get("conversation")), self.user.pk)

    async def on_tool_decision(self, content: dict) -> None:
        """Allow or Deny of a writing tool that waits, from any page of the conversation's owner."""
        allow = content.get("allow")
        if not isinstance(allow, bool) or not isinstance(content.get("step"), str):
            raise ChatError(_("The message could not be read."))
        if not approvals.decide(content["step"], self.user.pk, allow):
            raise ChatError(_("This tool call no longer waits for an answer."))

    async def _start(self, conversation, assistant, options: dict, accepted: dict, inputs) -> None:
        self.answers.watch(self.frames, conversation)  # the page that asks sees the answer, whichever it showed
        accepted.update(
            conversation=str(conversation.id),
            title=conversation.display_title,
            assistant_message=message_payload(assistant),
        )
        await self.answers.start(
            conversation=conversation, assistant_id=assistant.id, options=options, accepted=accepted, inputs=inputs
        )


def _post(user, conversation_id, text: str, image, profile_name) -> tuple:
    """The message and its answer's row written, and what the turn reads before its request, in one
    hop to the database thread: (conversation, user message, answer, TurnInputs or what reading them raised)."""
    conversation, user_message, assistant = services.post_to_conversation(
        user, conversation_id, text, image, profile_name
    )
    return conversation, user_message, assistant, _inputs_or_error(assistant.id, conversation)


def _regenerate(conversation) -> tuple:
    """``_post`` for a regenerated answer: (answer, TurnInputs or what reading them raised)."""
    assistant = services.prepare_regenerate(conversation)
    return assistant, _inputs_or_error(assistant.id, conversation)


def _inputs_or_error(assistant_id: int, conversation) -> TurnInputs | Exception:
    """The turn's inputs, or what reading them raised (no profile to answer with, the database busy): the
    answer's row is written already, so the turn ends with that failure's message, as any failure of a
    turn does. They are read here only, once."""
    try:
        return turn_inputs(assistant_id, conversation, with_profile=True)
    except Exception as error:
        log.info("turn %s: its inputs could not be read: %r", assistant_id, error)
        return error
