"""Conversation tools: search, edit a question and ask again, system prompt and preset, export, delete many."""

from __future__ import annotations

import json

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import content_disposition_header
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST

from chat.conversations import editing, export, search, selectors, services
from chat.conversations.runs import running_answers
from chat.errors import ChatError, NotFound
from chat.tools.services import set_tools_enabled
from chat.web.forms import BulkDeleteForm, EditQuestionForm, PromptSettingsForm, ToolsForm, first_error
from chat.web.views import change_and_return


@login_required
@require_GET
def search_page(request):
    query = search.clean_query(request.GET.get("q", ""))
    return render(
        request,
        "chat/search.html",
        {
            "query": query,
            "hits": search.search_conversations(request.user, query) if query else [],
            "query_max": search.QUERY_MAX_CHARS,
        },
    )


@login_required
@require_POST
def prompt_settings(request, conversation_id):
    return change_and_return(
        request,
        conversation_id,
        PromptSettingsForm(request.POST),
        lambda data: services.update_prompt_settings(
            request.user, conversation_id, system_prompt=data["system_prompt"], preset=data["preset"]
        ),
    )


@login_required
@require_POST
def tool_settings(request, conversation_id):
    """The person lets the model call tools in this conversation, or not (chat/tools/loop.py)."""
    return change_and_return(
        request,
        conversation_id,
        ToolsForm(request.POST),
        lambda data: set_tools_enabled(request.user, conversation_id, data["tools"]),
    )


@login_required
@require_POST
def edit_question(request, conversation_id, message_id):
    form = EditQuestionForm(request.POST)
    if not form.is_valid():
        flash.error(request, first_error(form))
        return redirect("chat:conversation", conversation_id)
    try:
        target = editing.edit_question(
            request.user,
            conversation_id,
            message_id,
            form.cleaned_data["text"],
            keep_later=form.cleaned_data["mode"] == "keep",
        )
    except NotFound as error:
        raise Http404(str(error)) from error
    except ChatError as error:
        flash.error(request, str(error))
        return redirect("chat:conversation", conversation_id)
    request.session["regenerate"] = str(target.id)
    return redirect("chat:conversation", target.id)


@login_required
@require_GET
def export_conversation(request, conversation_id, file_format):
    try:
        conversation = selectors.get_conversation(request.user, conversation_id)
    except NotFound as error:
        raise Http404(str(error)) from error
    if file_format == "json":
        body = json.dumps(export.export_json(conversation), ensure_ascii=False, indent=2)
        response = HttpResponse(body, content_type="application/json; charset=utf-8")
    else:
        response = HttpResponse(export.export_markdown(conversation), content_type="text/markdown; charset=utf-8")
    filename = export.export_filename(conversation, file_format)
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response


@login_required
@require_POST
def delete_many(request):
    form = BulkDeleteForm(request.POST, own_ids=selectors.own_conversation_ids(request.user))
    if not form.is_valid():
        flash.error(request, first_error(form))
        return redirect("chat:index")
    count = services.delete_conversations(request.user, form.cleaned_data["ids"])
    running_answers().stop_from_thread(form.cleaned_data["ids"], request.user.pk)
    deleted = ngettext("%(count)d conversation deleted.", "%(count)d conversations deleted.", count)
    flash.success(request, deleted % {"count": count})
    return redirect("chat:index")
