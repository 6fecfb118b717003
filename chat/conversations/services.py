"""Writes to conversations and messages, each scoped to its owner."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.accounts.profiles import profile_for
from chat.accounts.quotas import add_tokens, check_quota
from chat.conversations.limits import check_turn_allowed
from chat.conversations.presets import PRESETS, SYSTEM_PROMPT_MAX_CHARS
from chat.conversations.selectors import get_conversation
from chat.documents.removal import delete_document_rows, remove_files
from chat.errors import ChatError
from chat.models import Conversation, Document, Message
from chat.tools.services import end_unfinished_steps
from chat.usage import services as ledger
from chat.usage.entries import answer_entry, cut_streams
from monitor.public import ProfileUnavailable, ServingSlot

TITLE_MAX = 200
THINKING_BUDGET_MAX = 1_000_000


def create_conversation(user, title: str = "") -> Conversation:
    return Conversation.objects.create(owner=user, title=clean_title(title))


def clean_title(title: str) -> str:
    title = " ".join((title or "").split())
    if len(title) > TITLE_MAX:
        raise ChatError(
            ngettext(
                "A title can have at most %(limit)d character.",
                "A title can have at most %(limit)d characters.",
                TITLE_MAX,
            )
            % {"limit": TITLE_MAX}
        )
    return title


def rename_conversation(user, conversation_id, title: str) -> Conversation:
    conversation = get_conversation(user, conversation_id)
    conversation.title = clean_title(title)
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def delete_conversation(user, conversation_id) -> None:
    """The conversation, its messages, and its documents with their pages, summaries and files."""
    conversation = get_conversation(user, conversation_id)
    _delete_with_documents(Conversation.objects.filter(pk=conversation.pk))


def delete_conversations(user, conversation_ids: list) -> int:
    """Many at once, as one: only the person's own are touched; ids of others' are passed over.
    Returns how many were deleted."""
    return _delete_with_documents(Conversation.objects.filter(owner=user, id__in=conversation_ids))


def _delete_with_documents(conversations) -> int:
    with transaction.atomic():
        ids = list(conversations.values_list("id", flat=True))
        files = delete_document_rows(Document.objects.filter(conversation_id__in=ids))
        Conversation.objects.filter(id__in=ids).delete()
    remove_files(files)
    return len(ids)


def update_prompt_settings(user, conversation_id, *, system_prompt: str, preset: str) -> Conversation:
    """The system prompt each turn starts with and the sampling preset (a name from presets.PRESETS)."""
    conversation = get_conversation(user, conversation_id)
    if len(system_prompt) > SYSTEM_PROMPT_MAX_CHARS:
        raise ChatError(
            ngettext(
                "A system prompt can have at most %(limit)d character.",
                "A system prompt can have at most %(limit)d characters.",
                SYSTEM_PROMPT_MAX_CHARS,
            )
            % {"limit": SYSTEM_PROMPT_MAX_CHARS}
        )
    if preset and preset not in PRESETS:
        raise ChatError(_("Unknown sampling preset."))
    conversation.system_prompt = system_prompt
    conversation.sampling_preset = preset
    conversation.save(update_fields=["system_prompt", "sampling_preset", "updated_at"])
    return conversation


def update_thinking(user, conversation_id, *, enabled: bool, budget: int | None) -> Conversation:
    conversation = get_conversation(user, conversation_id)
    if budget is not None and not (0 <= budget <= THINKING_BUDGET_MAX):
        raise ChatError(_("The thinking budget must be between 0 and 1000000 tokens."))
    conversation.thinking_enabled = enabled
    conversation.thinking_budget = budget
    conversation.save(update_fields=["thinking_enabled", "thinking_budget", "updated_at"])
    return conversation


@transaction.atomic(savepoint=False)
def post_user_message(
    conversation: Conversation, text: str, image: tuple[bytes, str] | None
) -> tuple[Message, Message]:
    """Store the user's message and an empty assistant message that will stream (in the caller's
    transaction when there is one: no savepoint, as a failure here fails the whole turn's write)."""
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
    """The user's message to their conversation, or to a new one when no id is given: the turn counted
    against the quota and its rows written in one transaction (the other limits checked before it)."""
    check_turn_allowed(user)
    with transaction.atomic():
        check_quota(user.pk)
        conversation = get_conversation(user, conversation_id) if conversation_id else create_conversation(user)
        if profile_name:
            choose_profile(conversation, profile_name)
        user_message, assistant = post_user_message(conversation, text, image)
    return conversation, user_message, assistant


def choose_profile(conversation: Conversation, profile_name: str) -> None:
    """Answer this conversation with another server profile (one its owner may use: ProfileRefused, a
    ChatError naming why, when it is open only to other groups)."""
    if not isinstance(profile_name, str):
        raise ChatError(_("Unknown server profile."))
    try:
        profile = profile_for(conversation.owner_id, profile_name)
    except ProfileUnavailable as error:
        raise ChatError(_("The server profile %(name)s is not available.") % {"name": profile_name[:64]}) from error
    if not profile.is_chat:
        raise ChatError(
            _("The server profile %(name)s makes embeddings or rankings; pick a chat profile.") % {"name": profile.name}
        )
    if conversation.profile_id != profile.pk:
        conversation.profile = profile
        conversation.save(update_fields=["profile", "updated_at"])


def prepare_regenerate(conversation: Conversation) -> Message:
    """Replace the last assistant answer with a fresh one that will stream (limits as for a new message)."""
    check_turn_allowed(conversation.owner)
    with transaction.atomic():
        check_quota(conversation.owner_id)
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


def save_progress(message_id: int, content: str, reasoning: str) -> None:
    """A running answer's text so far (chat.conversations.progress: every CHAT_SAVE_INTERVAL_S of every
    streaming answer)."""
    Message.objects.filter(pk=message_id).update(content=content, reasoning=reasoning, updated_at=timezone.now())


def finish_message(
    message_id: int,
    *,
    content: str,
    reasoning: str,
    status: str,
    error: str = "",
    stats: dict | None = None,
    owner_id: int | None = None,
    served: ServingSlot | None = None,
) -> None:
    """Saves the answer's outcome and adds its tokens to ``owner_id``'s quota (looked up when not given:
    the runner gives it, as a conversation deleted while its answer ran has no message to look it up by,
    and the tokens were spent all the same) and its row to the usage ledger (``served``: the serving slot
    it had, if it got one)."""
    Message.objects.filter(id=message_id).update(
        content=content, reasoning=reasoning, status=status, error=error, stats=stats or {}, updated_at=timezone.now()
    )
    if owner_id is None:
        owner_id = Message.objects.filter(id=message_id).values_list("conversation__owner_id", flat=True).first()
    if owner_id is not None:
        add_tokens(owner_id, answer_tokens(content, reasoning, stats))
        ledger.record(answer_entry(owner_id, status, stats, answer_tokens(content, reasoning, None), served))


def answer_tokens(content: str, reasoning: str, stats: dict | None) -> int:
    """Tokens an answer counts against its owner's quota: the whole prompt (cached or not) and the
    output, as llama-server reported them; an answer stopped before its figures came is estimated
    from its length (about four characters a token), so stopping early does not make it free. An answer
    that went on after its model server failed counts the cut streams as well (``cut_streams``)."""
    stats = stats or {}
    figures = [stats.get(name) for name in ("prompt_tokens", "cached_tokens", "output_tokens")]
    cut = sum(cut_streams(stats))  # an answer resumed elsewhere: the streams cut before it count too
    if any(isinstance(figure, int) for figure in figures):
        return sum(figure for figure in figures if isinstance(figure, int)) + cut
    return (len(content) + len(reasoning)) // 4 + cut


def mark_orphaned_streams(older_than_s: float) -> int:
    """Answers left 'streaming' by a process that died: keep their text, mark them incomplete.
    ``older_than_s=0``: every one (the box's only web process starting: none can still be written)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_s)
    orphaned = Message.objects.filter(status=Message.Status.STREAMING, updated_at__lt=cutoff)
    with_steps = list(orphaned.filter(tool_steps__isnull=False).values_list("id", "tool_steps"))
    count = orphaned.update(
        status=Message.Status.INCOMPLETE,
        error=_("This answer was interrupted when the server restarted. The partial answer was kept."),
    )
    for message_id, steps in with_steps:
        end_unfinished_steps(message_id, steps)
    return count
