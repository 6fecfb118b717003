"""The staff page of MCP servers: add, change, remove a server; list its tools again; per tool,
enabled or not, reading or writing, and who may use it. Thin views over chat.tools.mcp."""

from __future__ import annotations

from django.contrib import messages as flash
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST

from chat.errors import ChatError
from chat.tools.mcp import selectors, services
from chat.tools.mcp.forms import ServerForm, ToolForm
from chat.web.forms import first_error
from chat.web.user_views import staff_required


def _server_or_404(server_id: int):
    row = selectors.server(server_id)
    if row is None:
        raise Http404
    return row


def _saved(request, form, save, message) -> None:
    """The form's values saved (`save(values)` returns what `message` names), or its first error flashed."""
    if not form.is_valid():
        flash.error(request, first_error(form))
        return
    try:
        flash.success(request, message(save(form.values())))
    except ChatError as error:
        flash.error(request, str(error))


def _refresh(request, server_id: int) -> None:
    try:
        count = services.refresh_tools(server_id)
    except ChatError as error:
        flash.error(request, str(error))
    else:
        flash.success(
            request,
            ngettext("The server lists %(count)d tool.", "The server lists %(count)d tools.", count) % {"count": count},
        )


@staff_required
@require_GET
def tool_servers(request):
    return render(request, "tools/servers.html", {"servers": selectors.server_rows(), "form": ServerForm()})


@staff_required
@require_POST
def add_tool_server(request):
    form = ServerForm(request.POST)
    if not form.is_valid():
        flash.error(request, first_error(form))
        return redirect("chat:tool-servers")
    try:
        row = services.save_server(None, form.values())
    except ChatError as error:
        flash.error(request, str(error))
        return redirect("chat:tool-servers")
    _refresh(request, row.pk)
    return redirect("chat:tool-server", row.pk)


@staff_required
@require_GET
def tool_server(request, server_id: int):
    row = _server_or_404(server_id)
    people, groups = selectors.people_and_groups()
    form = ServerForm(initial={"name": row.name, "url": row.url, "enabled": row.enabled})
    context = {
        "server": row,
        "header_names": sorted(row.headers),  # the names only: a value is never shown back
        "form": form,
        "tools": selectors.tool_rows(server_id),
        "people": people,
        "groups": groups,
    }
    return render(request, "tools/server.html", context)


@staff_required
@require_POST
def edit_tool_server(request, server_id: int):
    form = ServerForm(request.POST, header_names=sorted(_server_or_404(server_id).headers))
    _saved(request, form, lambda values: services.save_server(server_id, values), lambda _row: _("Tool server saved."))
    return redirect("chat:tool-server", server_id)


@staff_required
@require_POST
def refresh_tool_server(request, server_id: int):
    _refresh(request, server_id)
    return redirect("chat:tool-server", server_id)


@staff_required
@require_POST
def delete_tool_server(request, server_id: int):
    try:
        name = services.delete_server(server_id)
    except ChatError as error:
        flash.error(request, str(error))
    else:
        flash.success(request, _("Tool server %(name)s removed.") % {"name": name})
    return redirect("chat:tool-servers")


@staff_required
@require_POST
def set_tool(request, server_id: int, tool_id: int):
    people, groups = selectors.people_and_groups()
    form = ToolForm(request.POST, people=people, groups=groups)
    _saved(
        request,
        form,
        lambda values: services.set_tool(server_id, tool_id, values),
        lambda tool: _("Tool %(tool)s saved.") % {"tool": tool.name},
    )
    return redirect("chat:tool-server", server_id)
