"""Knowledge collections for people: the collections page, a collection's page (its documents, their
progress, its shares), the page a citation opens, and the chat's collection picker. Thin views over
chat.knowledge's services and selectors."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import Group
from django.db import transaction
from django.http import Http404, JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST

from chat import tasks
from chat.conversations.selectors import get_conversation
from chat.errors import ChatError, NotFound, PasswordNeeded
from chat.knowledge import selectors, services
from chat.web.forms import UploadForm, first_error
from chat.web.knowledge_forms import (
    CollectionForm,
    EveryoneForm,
    GroupShareForm,
    PickForm,
    RenameCollectionForm,
    ShareForm,
)

SHARED = gettext_lazy("Shared.")
UNSHARED = gettext_lazy("No longer shared.")


@login_required
@require_GET
def collections_page(request):
    readable = selectors.readable_collections(request.user).select_related("owner")
    return render(request, "knowledge/collections.html", {"collections": readable})


@login_required
@require_POST
def create_collection(request):
    form = CollectionForm(request.POST)
    if not form.is_valid():
        flash.error(request, first_error(form))
        return redirect("chat:collections")
    try:
        collection = services.create_collection(request.user, form.cleaned_data["name"], form.cleaned_data["slug"])
    except ChatError as error:
        flash.error(request, str(error))
        return redirect("chat:collections")
    return redirect("chat:collection", collection.pk)


@login_required
@require_GET
def collection_page(request, collection_id):
    try:
        collection = selectors.get_readable(request.user, collection_id)
    except NotFound as error:
        raise Http404(str(error)) from error
    owner = collection.owner_id == request.user.pk
    shares, group_shares = selectors.collection_shares(collection) if owner else ([], [])
    context = {
        "collection": collection,
        "owner": owner,
        "can_edit": selectors.editable_collections(request.user).filter(pk=collection.pk).exists(),
        "entries": [selectors.entry_payload(e) for e in selectors.collection_entries(request.user, collection.pk)],
        "shares": shares,
        "group_shares": group_shares,
        "groups": Group.objects.order_by("name") if owner else [],
        "max_documents": settings.KNOWLEDGE_MAX_DOCUMENTS,
        "max_mb": settings.KNOWLEDGE_MAX_BYTES // 1_048_576,
    }
    return render(request, "knowledge/collection.html", context)


@login_required
@require_GET
def collection_documents(request, collection_id):
    """The documents' states, polled by the page while some are being read."""
    try:
        entries = selectors.collection_entries(request.user, collection_id)
    except NotFound as error:
        return JsonResponse({"error": str(error)}, status=404)
    return JsonResponse({"documents": [selectors.entry_payload(entry) for entry in entries]})


@login_required
@require_POST
def add_collection_document(request, collection_id):
    """One file (the page sends each of many on its own, so each is refused or taken by itself)."""
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return JsonResponse({"error": first_error(form)}, status=400)
    upload = form.cleaned_data["file"]
    try:
        document = services.add_document(
            request.user, collection_id, upload.name, upload.read(), password=form.cleaned_data["password"] or None
        )
    except PasswordNeeded as error:
        return JsonResponse({"error": str(error), "needs_password": True}, status=400)
    except NotFound as error:
        return JsonResponse({"error": str(error)}, status=404)
    except ChatError as error:
        return JsonResponse({"error": str(error)}, status=400)
    transaction.on_commit(lambda: tasks.queue_indexing(document.id))
    return JsonResponse({"document": str(document.id)}, status=201)


@login_required
@require_POST
def delete_collection_document(request, document_id):
    try:
        services.delete_document(request.user, document_id)
    except NotFound as error:
        return JsonResponse({"error": str(error)}, status=404)
    return JsonResponse({"deleted": str(document_id)})


# A collection's forms: (the form, the change it makes, what is said when made). Refusals are shown.
ACTIONS = {
    "rename": (
        RenameCollectionForm,
        lambda user, pk, data: services.rename_collection(user, pk, data["name"]),
        gettext_lazy("Renamed."),
    ),
    "share": (ShareForm, lambda user, pk, data: services.share(user, pk, data["username"], data["access"]), SHARED),
    "unshare": (ShareForm, lambda user, pk, data: services.unshare(user, pk, data["username"]), UNSHARED),
    "share-group": (
        GroupShareForm,
        lambda user, pk, data: services.share_with_group(user, pk, data["group"], data["access"]),
        SHARED,
    ),
    "unshare-group": (GroupShareForm, lambda user, pk, data: services.unshare_group(user, pk, data["group"]), UNSHARED),
    "everyone": (
        EveryoneForm,
        lambda user, pk, data: services.share_with_everyone(user, pk, data["shared"]),
        gettext_lazy("Saved."),
    ),
}


@login_required
@require_POST
def collection_action(request, collection_id, action: str):
    """One of the collection's forms (``ACTIONS``); back to its page."""
    if action not in ACTIONS:
        raise Http404
    form_class, change, done = ACTIONS[action]
    form = form_class(request.POST)
    try:
        if not form.is_valid():
            raise ChatError(first_error(form))
        change(request.user, collection_id, form.cleaned_data)
    except NotFound as error:
        raise Http404(str(error)) from error
    except ChatError as error:
        flash.error(request, str(error))
    else:
        flash.success(request, str(done))
    return redirect("chat:collection", collection_id)


@login_required
@require_POST
def delete_collection(request, collection_id):
    try:
        services.delete_collection(request.user, collection_id)
    except NotFound as error:
        raise Http404(str(error)) from error
    flash.success(request, _("Collection deleted."))
    return redirect("chat:collections")


@login_required
@require_GET
def cited_page(request, document_id, number: int):
    """The page a citation opens: only of a collection the person may read now."""
    try:
        document, text = selectors.readable_page(request.user, document_id, number)
    except NotFound as error:
        raise Http404(str(error)) from error
    sectioned = document.kind in document.SECTIONED
    return render(
        request, "knowledge/page.html", {"document": document, "number": number, "text": text, "sectioned": sectioned}
    )


@login_required
@require_GET
def conversation_sources(request, conversation_id):
    """Per answer, the pages of the collections' passages it was given (those readable now)."""
    try:
        conversation = get_conversation(request.user, conversation_id)
    except NotFound as error:
        return JsonResponse({"error": str(error)}, status=404)
    return JsonResponse({"sources": selectors.conversation_sources(request.user, conversation.id)})


@login_required
@require_POST
def pick_collections(request, conversation_id):
    try:
        conversation = get_conversation(request.user, conversation_id)
    except NotFound as error:
        raise Http404(str(error)) from error
    readable = selectors.readable_collections(request.user)
    form = PickForm(request.POST, choices=[(c.pk, c.name) for c in readable])
    if form.is_valid():
        services.pick_collections(request.user, conversation, form.cleaned_data["collections"])
    else:
        flash.error(request, first_error(form))
    return redirect("chat:conversation", conversation.id)
