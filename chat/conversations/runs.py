"""Answers that outlive the page: the web process's registry of running answers.

An answer runs as an asyncio task owned by this registry (``running_answers()``), not by the socket that asked for it: it goes
on when every page closes, saves its text as it goes and its outcome at the end (TurnRunner), and
every page of its owner showing the conversation sees it: a page that opens (another tab, a phone,
a reconnect) gets a snapshot (text and thinking so far, with the sequence number of the last text
in it) and then the live text after it. The snapshot is taken and the page added in one step of
the event loop, so nothing falls between them and nothing comes twice; the page also drops text
numbered at or below its snapshot's.

Why the web process and not a Celery worker: the tokens arrive here (the llama client runs in this
event loop) and the sockets are here, so a token costs one hand-off to each page and no hop through
Redis and back, which a small box would pay in CPU taken from generation. It is the box's one web
process (see qwenweb.serve): when it dies its answers die with it, and the sweep at its next start
marks them interrupted with their text kept, as before. (Where several web processes share a
database, QWENWEB_SWEEP_ON_START off, a page served by another process than the answer's sees the
stored partial answer and its outcome, not the live text.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from functools import partial

from django.conf import settings
from django.utils.translation import gettext as _

from chat.conversations import heap
from chat.conversations.frames import FrameSender
from chat.conversations.selectors import TurnInputs
from chat.conversations.turns import TurnRunner
from chat.errors import ChatError
from chat.models import Conversation, Message

# The events that say where an answer stands before its text starts (waiting in the queue, a notice,
# the prompt's progress): a run keeps the latest, which a page that opens late still needs.
STATUS_EVENT_TYPES = frozenset({"queued", "notice", "progress"})
# The conversations one socket watches: a page left open all day that starts conversation after
# conversation would otherwise keep a watch on each of them until it closes (issue 52).
WATCH_LIMIT = 8


class Run:
    """One running answer: what it has said so far, numbered, and the task that writes it."""

    def __init__(self, conversation_id: str, owner_id: object, assistant_id: int):
        self.conversation_id = conversation_id
        self.owner_id = owner_id
        self.assistant_id = assistant_id
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.seq = 0
        self.latest_status: dict | None = None
        self.tool_steps: dict[str, dict] = {}  # by step id, as their latest event showed them
        self.runner: TurnRunner | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # where it runs: stop_from_thread hands stops to it

    def record(self, event: dict) -> None:
        self.seq += 1
        event["seq"] = self.seq
        kind = event["type"]
        if kind == "token":
            self.content.append(event["text"])
        elif kind == "reasoning":
            self.reasoning.append(event["text"])
        elif kind in STATUS_EVENT_TYPES:
            self.latest_status = event
        elif kind in ("started", "resumed"):  # the answer (again) under way: no pause to show late pages
            self.latest_status = None
        elif kind == "tool":
            self.tool_steps[event["step"]["id"]] = event["step"]

    def snapshot(self) -> dict:
        return {
            "type": "snapshot",
            "conversation": self.conversation_id,
            "message": self.assistant_id,
            "content": "".join(self.content),
            "reasoning": "".join(self.reasoning),
            "tool_steps": list(self.tool_steps.values()),
            "seq": self.seq,
        }


class RunningAnswers:
    """Running answers by conversation, and the pages watching each conversation.

    Bounds: a run is kept from its start to its end (``done``, or its task's end, whichever is
    first); a page's watches from ``watch`` to ``unwatch`` (its socket closed), at most WATCH_LIMIT
    conversations per page: a page that watches one more lets go of the one it watched longest ago
    whose answer is not running (one that is running stays watched: its page asked for it, and
    a person has at most CHAT_TURNS_IN_FLIGHT).
    """

    def __init__(self, frame_s: float | None = None):
        self.frame_s = settings.CHAT_FRAME_S if frame_s is None else frame_s
        self._runs: dict[str, Run] = {}
        self._claimed: dict[str, object] = {}
        self._watchers: dict[str, set[FrameSender]] = {}
        self._watching: dict[FrameSender, dict[str, None]] = {}  # each page's watches, oldest first

    def sender(self, send, user_id: object) -> FrameSender:
        return FrameSender(send, self.frame_s, user_id)

    @contextlib.contextmanager
    def claim(self, conversation_id: str | None, user_id: object) -> Iterator[None]:
        """Refuse a second answer in a conversation that has one running (or being set up, by another page).

        Another person's conversation is not refused here: the caller's ownership check says it does not exist.
        """
        if conversation_id is None:
            yield
            return
        run = self._runs.get(conversation_id)
        if (run is not None and run.owner_id == user_id) or self._claimed.get(conversation_id) == user_id:
            raise ChatError(_("Wait for the current answer to finish, or stop it."))
        self._claimed[conversation_id] = user_id
        try:
            yield
        finally:
            self._claimed.pop(conversation_id, None)

    def watch(self, sender: FrameSender, conversation: Conversation) -> list[dict]:
        """Show ``conversation``'s answers on this page from now on (its owner's pages only).

        A socket may watch several (one that sends to new conversations in a row gets every answer).

        Returns what the page needs first: the running answer's snapshot and where it stands,
        or an 'idle' event. The caller checked the conversation is the page's person's own.
        """
        if conversation.owner_id != sender.user_id:
            raise ChatError(_("This conversation does not exist."))
        key = str(conversation.id)
        self._watchers.setdefault(key, set()).add(sender)
        watching = self._watching.setdefault(sender, {})
        watching.pop(key, None)
        watching[key] = None  # the newest
        if len(watching) > WATCH_LIMIT:
            self._let_go(sender, watching)
        run = self._runs.get(key)
        if run is None:
            return [{"type": "idle", "conversation": key}]
        return [run.snapshot()] + ([run.latest_status] if run.latest_status else [])

    def unwatch(self, sender: FrameSender) -> None:
        """The page is gone: it watches nothing any more (the answers go on)."""
        for key in self._watching.pop(sender, ()):
            self._drop_watcher(key, sender)
        heap.trimmer.ended()

    def _let_go(self, sender: FrameSender, watching: dict[str, None]) -> None:
        """The page's oldest watch whose answer is not running is let go (none: all are running)."""
        for key in watching:
            if key not in self._runs:
                del watching[key]
                self._drop_watcher(key, sender)
                return

    def _drop_watcher(self, key: str, sender: FrameSender) -> None:
        watchers = self._watchers[key]
        watchers.discard(sender)
        if not watchers:
            del self._watchers[key]

    async def start(
        self,
        *,
        conversation: Conversation,
        assistant_id: int,
        options: dict,
        accepted: dict,
        inputs: TurnInputs | BaseException | None = None,
        runner_class: type[TurnRunner] = TurnRunner,
    ) -> Run:
        """Run the answer; ``accepted`` (the new messages) goes first to every page watching.
        ``inputs``: what the turn reads before its request (or what reading it raised), when the caller read it."""
        key = str(conversation.id)
        if key in self._runs:
            raise ChatError(_("Wait for the current answer to finish, or stop it."))
        run = Run(key, conversation.owner_id, assistant_id)
        run.runner = runner_class(
            conversation=conversation,
            assistant_id=assistant_id,
            user_key=str(conversation.owner_id),
            send=partial(self.publish, run),
            options=options,
            inputs=inputs,
        )
        run.loop = asyncio.get_running_loop()
        self._runs[key] = run
        await self.publish(run, accepted)
        run.runner.start().add_done_callback(partial(self._ended, run))
        return run

    def stop(self, conversation_id: str, user_id: object) -> None:
        run = self._runs.get(conversation_id)
        if run is not None and run.owner_id == user_id and run.runner is not None:
            run.runner.stop(Message.Status.STOPPED)

    def stop_from_thread(self, conversation_ids, user_id: object) -> None:
        """``stop`` for a view, which runs in a thread of its own: the conversations were deleted, so their
        answers would otherwise go on to their last token for nobody, holding a slot of the model."""
        for key in map(str, conversation_ids):
            run = self._runs.get(key)
            if run is not None and run.loop is not None:
                run.loop.call_soon_threadsafe(self.stop, key, user_id)

    async def publish(self, run: Run, event: dict) -> None:
        run.record(event)
        if event["type"] == "done":
            self._ended(run)  # a page that opens from now on reads the stored answer
        for sender in tuple(self._watchers.get(run.conversation_id, ())):
            if sender.user_id == run.owner_id:
                await sender.push(event)

    def _ended(self, run: Run, _task: asyncio.Task | None = None) -> None:
        if self._runs.get(run.conversation_id) is run:
            del self._runs[run.conversation_id]
            heap.trimmer.ended()


# One for the process: every socket and view of the web process sees the same running answers.
_running_answers = RunningAnswers()


def running_answers() -> RunningAnswers:
    """The web process's running answers."""
    return _running_answers
