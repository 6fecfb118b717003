"""Document JSON views for the chat page: upload, status, cancel, delete, summarize again."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from chat import tasks
from chat.conversations.selectors import get_conversation
from chat.conversations.services import create_conversation
from chat.documents import removal, services, uploads
from chat.documents.selectors import document_payload, get_document
from chat.errors import ChatError, NotFound, PasswordNeeded
from chat.web.forms import SummarizeForm, UploadForm, first_error


def _json_error(message: str, status: int = 400, **extra) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


@login_required
@require_POST
def upload_document(request):
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return _json_error(first_error(form))
    upload = form.cleaned_data["file"]
    try:
        if form.cleaned_data["conversation"]:
            conversation = get_conversation(request.user, form.cleaned_data["conversation"])
        else:
            conversation = create_conversation(request.user, upload.name[:60])
        document = uploads.create_document(
            request.user,
            conversation,
            upload.name,
            upload.read(),
            password=form.cleaned_data["password"] or None,
            language=form.cleaned_data["language"],
        )
    except PasswordNeeded as error:
        return _json_error(str(error), needs_password=True)
    except NotFound as error:
        return _json_error(str(error), 404)
    except ChatError as error:
        return _json_error(str(error))
    transaction.on_commit(lambda: tasks.ingest_document.delay(str(document.id)))
    return JsonResponse(
        {
            "document": document_payload(document),
            "conversation": str(conversation.id),
            "conversation_url": reverse("chat:conversation", args=[conversation.id]),
        },
        status=201,
    )


@login_required
@require_GET
def document_status(request, document_id):
    try:
        document = get_document(request.user, document_id)
    except NotFound as error:
        return _json_error(str(error), 404)
    return JsonResponse({"document": document_payload(document)})


@login_required
@require_POST
def cancel_document(request, document_id):
    try:
        document = services.request_cancel(request.user, document_id)
    except NotFound as error:
        return _json_error(str(error), 404)
    return JsonResponse({"document": document_payload(document)})


@login_required
@require_POST
def delete_document(request, document_id):
    try:
        removal.delete_document(request.user, document_id)
    except NotFound as error:
        return _json_error(str(error), 404)
    return JsonResponse({"deleted": str(document_id)})


@login_required
@require_POST
def summarize_document(request, document_id):
    form = SummarizeForm(request.POST)
    if not form.is_valid():
        return _json_error(first_error(form))
    try:
        document = services.restart_summary(request.user, document_id, form.cleaned_data["language"])
    except NotFound as error:
        return _json_error(str(error), 404)
    except ChatError as error:
        return _json_error(str(error))
    transaction.on_commit(lambda: tasks.summarize_document.delay(str(document.id)))
    return JsonResponse({"document": document_payload(document)})
