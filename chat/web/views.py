"""Chat pages: thin views over the conversation services and selectors."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.forms import Form
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from chat.conversations import selectors, services
from chat.conversations.presets import SYSTEM_PROMPT_MAX_CHARS, preset_choices
from chat.conversations.runs import running_answers
from chat.documents.languages import language_choices
from chat.documents.selectors import conversation_documents
from chat.errors import ChatError, NotFound
from chat.knowledge.selectors import picked_collection_ids, readable_collections
from chat.web.forms import RenameForm, ThinkingForm, first_error


def _page(request, conversation=None):
    profiles = selectors.profile_choices(request.user.pk)
    return render(
        request,
        "chat/index.html",
        {
            "conversation": conversation,
            "conversations": selectors.list_conversations(request.user),
            "history": selectors.conversation_history(conversation),
            "documents": conversation_documents(conversation),
            "summary_languages": language_choices(),
            "profiles": profiles,
            "current_profile": selectors.current_profile_name(profiles, conversation),
            "image_max_edge": settings.CHAT_IMAGE_MAX_EDGE,
            "presets": preset_choices(),
            "system_prompt_max": SYSTEM_PROMPT_MAX_CHARS,
            "collections": readable_collections(request.user) if conversation else [],
            "picked_collections": picked_collection_ids(conversation.id) if conversation else [],
            # Set by an edited question: the page asks for its answer once (a reload does not ask again).
            "regenerate": bool(conversation) and request.session.pop("regenerate", None) == str(conversation.id),
        },
    )


@login_required
@require_GET
def index(request):
    return _page(request)


@login_required
@require_GET
def conversation_page(request, conversation_id):
    try:
        conversation = selectors.get_conversation(request.user, conversation_id)
    except NotFound as error:
        raise Http404(str(error)) from error
    return _page(request, conversation)


@login_required
@require_POST
def new_conversation(request):
    conversation = services.create_conversation(request.user)
    return redirect("chat:conversation", conversation.id)


def change_and_return(request, conversation_id, form: Form, change: Callable[[dict], object]):
    """Run ``change(cleaned_data)`` on a valid form; unknown or foreign ids are 404, refusals shown on the page."""
    if not form.is_valid():
        flash.error(request, first_error(form))
        return redirect("chat:conversation", conversation_id)
    try:
        change(form.cleaned_data)
    except NotFound as error:
        raise Http404(str(error)) from error
    except ChatError as error:
        flash.error(request, str(error))
    return redirect("chat:conversation", conversation_id)


@login_required
@require_POST
def rename_conversation(request, conversation_id):
    return change_and_return(
        request,
        conversation_id,
        RenameForm(request.POST),
        lambda data: services.rename_conversation(request.user, conversation_id, data["title"]),
    )


@login_required
@require_POST
def delete_conversation(request, conversation_id):
    try:
        services.delete_conversation(request.user, conversation_id)
    except NotFound as error:
        raise Http404(str(error)) from error
    running_answers().stop_from_thread([conversation_id], request.user.pk)
    return redirect("chat:index")


@login_required
@require_POST
def conversation_settings(request, conversation_id):
    return change_and_return(
        request,
        conversation_id,
        ThinkingForm(request.POST),
        lambda data: services.update_thinking(
            request.user, conversation_id, enabled=data["thinking"], budget=data["thinking_budget"]
        ),
    )


@login_required
@require_GET
def message_image(request, message_id):
    try:
        data, content_type = selectors.get_message_image(request.user, message_id)
    except NotFound as error:
        raise Http404(str(error)) from error
    response = HttpResponse(data, content_type=content_type)
    response["Cache-Control"] = "private, max-age=3600"
    return response
