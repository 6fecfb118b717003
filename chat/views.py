"""Chat pages: thin views over chat.services.conversations."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from chat import tasks
from chat.errors import ChatError, NotFound
from chat.services import conversations, documents, summaries


def _page(request, conversation=None):
    history = []
    if conversation is not None:
        history = [conversations.message_payload(m) for m in conversation.messages.all()]
    return render(
        request,
        "chat/index.html",
        {
            "conversation": conversation,
            "conversations": conversations.list_conversations(request.user),
            "history": history,
            "documents": documents.conversation_documents(conversation),
            "summary_languages": summary_languages(),
            "document_strings": document_strings(),
            "ui_strings": ui_strings(),
            "profiles": conversations.profile_choices(),
            "current_profile": _current_profile_name(conversation),
        },
    )


def _current_profile_name(conversation) -> str:
    if conversation is not None and conversation.profile_id and conversation.profile.available_to_users:
        return conversation.profile.name
    default = next((choice for choice in conversations.profile_choices() if choice["default"]), None)
    return default["name"] if default else ""


@login_required
@require_GET
def index(request):
    return _page(request)


@login_required
@require_GET
def conversation_page(request, conversation_id):
    try:
        conversation = conversations.get_conversation(request.user, conversation_id)
    except NotFound as error:
        raise Http404(str(error)) from error
    return _page(request, conversation)


@login_required
@require_POST
def new_conversation(request):
    conversation = conversations.create_conversation(request.user)
    return redirect("chat:conversation", conversation.id)


def _change_and_return(request, conversation_id, change):
    """Run ``change()``; unknown or foreign ids are 404, refusals shown on the page."""
    try:
        change()
    except NotFound as error:
        raise Http404(str(error)) from error
    except ChatError as error:
        flash.error(request, str(error))
    return redirect("chat:conversation", conversation_id)


@login_required
@require_POST
def rename_conversation(request, conversation_id):
    title = request.POST.get("title", "")
    return _change_and_return(
        request, conversation_id, lambda: conversations.rename_conversation(request.user, conversation_id, title)
    )


@login_required
@require_POST
def delete_conversation(request, conversation_id):
    try:
        conversations.delete_conversation(request.user, conversation_id)
    except NotFound as error:
        raise Http404(str(error)) from error
    return redirect("chat:index")


@login_required
@require_POST
def conversation_settings(request, conversation_id):
    raw_budget = request.POST.get("thinking_budget", "").strip()
    try:
        budget = int(raw_budget) if raw_budget else None
    except ValueError:
        budget = -1  # refused with the range below
    enabled = request.POST.get("thinking") == "on"
    return _change_and_return(
        request,
        conversation_id,
        lambda: conversations.update_thinking(request.user, conversation_id, enabled=enabled, budget=budget),
    )


@login_required
@require_GET
def message_image(request, message_id):
    try:
        data, content_type = conversations.get_message_image(request.user, message_id)
    except NotFound as error:
        raise Http404(str(error)) from error
    response = HttpResponse(data, content_type=content_type)
    response["Cache-Control"] = "private, max-age=3600"
    return response


def ui_strings() -> dict[str, str]:
    """Strings the page's script shows, translated here so the script stays language-free."""
    return {
        "thinking": _("Thinking"),
        "stopped": _("Stopped"),
        "incomplete": _("Incomplete"),
        "error": _("Error"),
        "queued": _("Waiting in line: you are number %(position)s."),
        "progress": _("Reading the prompt… %(percent)s"),
        "connecting": _("Connecting…"),
        "disconnected": _("Connection lost; reconnecting…"),
        "stats": _("%(prompt)s prompt tokens · %(output)s output tokens · first token %(ttft)s ms · %(tps)s tokens/s"),
        "copy": _("Copy"),
        "regenerate": _("Regenerate"),
        "image_too_large": _("The image is too large: the limit is %(mb)s MB."),
        "not_an_image": _("The attachment is not an image."),
    }


# ---------------------------------------------------------------- documents


def _json_error(message: str, status: int = 400, **extra) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


@login_required
@require_POST
def upload_document(request):
    upload = request.FILES.get("file")
    if upload is None:
        return _json_error(_("Choose a file to upload."))
    if upload.size > settings.DOCUMENT_MAX_BYTES:
        return _json_error(
            _("The file is too large: the limit is %(mb)d MB.") % {"mb": settings.DOCUMENT_MAX_BYTES // 1_048_576}
        )
    try:
        conversation_id = request.POST.get("conversation")
        if conversation_id:
            conversation = conversations.get_conversation(request.user, conversation_id)
        else:
            conversation = conversations.create_conversation(request.user, upload.name[:60])
        document = documents.create_document(
            request.user,
            conversation,
            upload.name,
            upload.read(),
            password=request.POST.get("password") or None,
            language=request.POST.get("language", ""),
        )
    except documents.PasswordNeeded as error:
        return _json_error(str(error), needs_password=True)
    except NotFound as error:
        return _json_error(str(error), 404)
    except ChatError as error:
        return _json_error(str(error))
    transaction.on_commit(lambda: tasks.ingest_document.delay(str(document.id)))
    return JsonResponse(
        {
            "document": documents.document_payload(document),
            "conversation": str(conversation.id),
            "conversation_url": reverse("chat:conversation", args=[conversation.id]),
        },
        status=201,
    )


@login_required
@require_GET
def document_status(request, document_id):
    try:
        document = documents.get_document(request.user, document_id)
    except NotFound as error:
        return _json_error(str(error), 404)
    return JsonResponse({"document": documents.document_payload(document)})


@login_required
@require_POST
def cancel_document(request, document_id):
    try:
        document = documents.request_cancel(request.user, document_id)
    except NotFound as error:
        return _json_error(str(error), 404)
    return JsonResponse({"document": documents.document_payload(document)})


@login_required
@require_POST
def summarize_document(request, document_id):
    try:
        document = summaries.restart_summary(request.user, document_id, request.POST.get("language"))
    except NotFound as error:
        return _json_error(str(error), 404)
    except ChatError as error:
        return _json_error(str(error))
    transaction.on_commit(lambda: tasks.summarize_document.delay(str(document.id)))
    return JsonResponse({"document": documents.document_payload(document)})


def summary_languages() -> list[tuple[str, str]]:
    return [
        ("", _("Document's language")),
        ("en", _("English")),
        ("zh-hans", _("Simplified Chinese")),
        ("zh-hant", _("Traditional Chinese")),
        ("ja", _("Japanese")),
        ("ko", _("Korean")),
        ("fr", _("French")),
        ("de", _("German")),
        ("es", _("Spanish")),
    ]


def document_strings() -> dict[str, str]:
    return {
        "pages": _("%(done)s of %(total)s pages read"),
        "parts": _("%(done)s of %(total)s parts summarized"),
        "cancel": _("Cancel"),
        "summarize_again": _("Summarize again"),
        "retry": _("Continue the summary"),
        "uploading": _("Uploading…"),
        "waiting": _("waiting"),
        "running": _("summarizing"),
        "done": _("done"),
        "upload_failed": _("The upload failed; try again."),
    }
