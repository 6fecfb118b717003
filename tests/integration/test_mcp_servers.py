"""MCP servers staff register, against a real MCP server (the official SDK's, Streamable HTTP, in its own
process: tests/support/mcp_server.py): the staff page registers it and lists its tools, staff decide per
tool, only the people given a tool get it, and a call returns the tool's text or, for a tool that is
slow, broken or huge, bad arguments, a server down, a redirect or a host that resolves elsewhere, a
message a person reads. Secrets entered as headers never appear in a page."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from http.server import BaseHTTPRequestHandler

import pytest
from django.contrib.auth.models import Group
from django.test import Client, override_settings
from django.utils import translation

from chat.tools.mcp import PROVIDER, selectors, services
from chat.tools.mcp.models import McpServer, McpTool
from chat.tools.providers import as_now, tools_for
from tests.support import mcp_staff
from tests.support.client import make_user
from tests.support.loopback import LoopbackServer
from tests.support.mcp_server import McpTestServer
from tests.support.mcp_staff import give, tool

SMALL_CAP = 256 * 1024


@pytest.fixture(scope="module")
def mcp_server():
    server = McpTestServer()
    yield server
    server.release()
    server.stop()


@pytest.fixture
def staff_page():
    return mcp_staff.staff_page()


@pytest.fixture
def registered(mcp_server, staff_page):
    """The test server added through the staff page, its tools listed; removed after the test."""
    row = mcp_staff.register(staff_page, mcp_server, more_headers="X-Office: third floor")
    yield row
    McpServer.objects.filter(pk=row.pk).delete()


def call(name: str, user, arguments: dict, *, timeout: float = 20):
    spec = next(spec for spec in PROVIDER.tools_for(user, None) if spec.name == name)
    return asyncio.run(PROVIDER.call(spec, arguments, user=user, timeout=timeout))


@pytest.fixture
def person(registered, staff_page):
    """A person given every sound tool of the server by name (reading: lookup_ticket, the rest writing)."""
    someone = make_user()
    for name in ("lookup_ticket", "create_ticket", "slow_lookup", "broken_tool", "huge_result"):
        give(staff_page, registered, name, writes=name != "lookup_ticket", users=[someone])
    return someone


def test_staff_register_a_server_its_tools_are_listed_and_secrets_never_shown(mcp_server, staff_page, registered):
    page = staff_page.get(f"/staff/tools/{registered.pk}/").content.decode()
    listed = set(McpTool.objects.filter(server=registered).values_list("name", flat=True))
    assert listed == {
        "lookup_ticket",
        "create_ticket",
        "floor_status",
        "order_toner",
        "slow_lookup",
        "broken_tool",
        "huge_result",
        "bad_schema",
    }
    for name in listed:
        assert f'data-tool="{name}"' in page
    # New tools: disabled and writing until staff decide.
    assert not McpTool.objects.filter(server=registered, enabled=True).exists()
    assert not McpTool.objects.filter(server=registered, writes=False).exists()
    # The invalid schema refused at listing, with a message; it cannot be enabled.
    assert tool(registered, "bad_schema").problem.startswith("Its input schema is invalid")
    assert "Its input schema is invalid" in page
    give(staff_page, registered, "bad_schema", writes=False, users=[make_user()])
    assert not tool(registered, "bad_schema").enabled
    # The header names are shown as set; their values never, on any page.
    assert "Authorization" in page and "X-Office" in page
    listing = staff_page.get("/staff/tools/").content.decode()
    for html in (page, listing):
        assert mcp_server.secret not in html and "third floor" not in html
    # Replacing one header keeps the other; removing one removes it.
    staff_page.post(
        f"/staff/tools/{registered.pk}/edit/",
        {"name": registered.name, "url": mcp_server.url, "enabled": "on", "headers": "X-Office: fourth floor"},
    )
    registered.refresh_from_db()
    assert registered.headers == {"Authorization": f"Bearer {mcp_server.secret}", "X-Office": "fourth floor"}
    staff_page.post(
        f"/staff/tools/{registered.pk}/edit/",
        {"name": registered.name, "url": mcp_server.url, "enabled": "on", "remove_headers": ["X-Office"]},
    )
    registered.refresh_from_db()
    assert registered.headers == {"Authorization": f"Bearer {mcp_server.secret}"}
    assert registered.addresses == ["127.0.0.1"]


def test_enable_disable_and_marks_decide_what_a_person_gets(registered, staff_page):
    member, outsider = make_user(), make_user()
    group = Group.objects.create(name=f"helpdesk-{uuid.uuid4().hex[:6]}")
    member.groups.add(group)
    try:
        give(staff_page, registered, "lookup_ticket", writes=False, groups=[group])
        give(staff_page, registered, "create_ticket", writes=True, groups=[group])
        # Enabled but given to no one: no one gets it (staff neither).
        give(staff_page, registered, "slow_lookup", writes=False)
        specs = {spec.name: spec for spec in tools_for(member, None)}
        assert specs["lookup_ticket"].writes is False and specs["create_ticket"].writes is True
        assert specs["lookup_ticket"].source == f"mcp:{registered.pk}"
        assert specs["lookup_ticket"].parameters["required"] == ["number"]
        assert "slow_lookup" not in specs
        assert [spec.name for spec in PROVIDER.tools_for(outsider, None)] == []
        staff = make_user(is_staff=True)
        assert [spec.name for spec in PROVIDER.tools_for(staff, None)] == []
        # Disabled: gone, and a spec the turn still holds is refused at the call.
        held = specs["create_ticket"]
        give(staff_page, registered, "create_ticket", writes=True, groups=[group], enabled=False)
        assert "create_ticket" not in {spec.name for spec in tools_for(member, None)}
        refused = asyncio.run(PROVIDER.call(held, {"title": "x"}, user=member, timeout=10))
        assert refused.is_error and refused.text == "The tool create_ticket is not available to you."
        # The whole server disabled: none of its tools.
        McpServer.objects.filter(pk=registered.pk).update(enabled=False)
        assert PROVIDER.tools_for(member, None) == []
    finally:
        group.delete()


def test_only_staff_reach_the_staff_urls(registered):
    person = Client(SERVER_NAME="127.0.0.1")
    person.force_login(make_user())
    anonymous = Client(SERVER_NAME="127.0.0.1")
    lookup = tool(registered, "lookup_ticket")
    gets = ["/staff/tools/", f"/staff/tools/{registered.pk}/"]
    posts = [
        ("/staff/tools/new/", {"name": "sneaky", "url": "http://127.0.0.1:9/mcp"}),
        (f"/staff/tools/{registered.pk}/edit/", {"name": "sneaky", "url": "http://127.0.0.1:9/mcp"}),
        (f"/staff/tools/{registered.pk}/refresh/", {}),
        (f"/staff/tools/{registered.pk}/t/{lookup.pk}/", {"enabled": "on", "writes": "0"}),
        (f"/staff/tools/{registered.pk}/delete/", {}),
    ]
    for client in (person, anonymous):
        for url in gets:
            assert client.get(url).status_code == 403, url
        for url, data in posts:
            assert client.post(url, data).status_code == 403, url
    registered.refresh_from_db()
    assert registered.name != "sneaky" and not tool(registered, "lookup_ticket").enabled
    assert not McpServer.objects.filter(name="sneaky").exists()


def test_a_call_returns_the_tools_text_and_a_broken_tool_a_message(person, mcp_server):
    answer = call("lookup_ticket", person, {"number": 42})
    assert not answer.is_error
    assert answer.text == "Ticket 42: printer on floor 3 is out of toner (open)."
    broken = call("broken_tool", person, {"number": 1})
    assert broken.is_error and broken.text.startswith("The tool broken_tool failed: ")


def test_a_tool_marked_writing_after_the_offer_is_not_run_unasked(person, registered, staff_page, mcp_server):
    """The loop reads the mark again before each call (``as_now``: it then asks first); a spec read before staff
    marked the tool writing is refused at the call itself, before anything is sent."""
    held = next(spec for spec in tools_for(person, None) if spec.name == "lookup_ticket")
    give(staff_page, registered, "lookup_ticket", writes=True, users=[person])
    assert not held.writes and as_now(held, person, None).writes
    before = mcp_server.state()["calls"]
    refused = asyncio.run(PROVIDER.call(held, {"number": 42}, user=person, timeout=10))
    assert refused.is_error and refused.text == (
        "The tool lookup_ticket was marked as writing during this answer, so it did not run unasked."
    )
    assert mcp_server.state()["calls"] == before


def test_arguments_that_do_not_fit_the_schema_never_reach_the_server(person, mcp_server):
    before = mcp_server.state()["calls"]
    wrong = call("lookup_ticket", person, {"number": "forty-two"})
    assert (
        wrong.is_error
        and wrong.text == "The argument number does not fit the tool's schema: 'forty-two' is not of type 'integer'"
    )
    missing = call("create_ticket", person, {})
    assert (
        missing.is_error
        and missing.text == "The arguments do not fit the tool's schema: 'title' is a required property"
    )
    with translation.override("zh-hans"):
        chinese = call("lookup_ticket", person, {"number": "forty-two"})
    assert chinese.text == "参数 number 不符合该工具的模式：'forty-two' is not of type 'integer'"
    assert mcp_server.state()["calls"] == before


def test_a_slow_tool_is_cut_at_its_timeout(person, registered, mcp_server):
    answer = call("slow_lookup", person, {"number": 7}, timeout=1)
    assert answer.is_error and answer.text == f"The tool server {registered.name} did not answer within 1 s."
    assert mcp_server.state()["now"] >= 1  # the tool itself is still held: the limit ended the call


@override_settings(MCP_MAX_RESULT_BYTES=SMALL_CAP)
def test_a_huge_result_ends_with_a_message_and_no_more_is_read(person, registered):
    answer = call("huge_result", person, {})
    assert answer.is_error
    assert answer.text == f"The tool server {registered.name} sent more than 0.2 MB; the answer was not read further."
    # Read up to the cap and one network chunk past it at most, of the 50 MB it sent.
    assert SMALL_CAP < answer.meta["bytes_read"] <= SMALL_CAP + 256 * 1024


def test_a_server_down_a_wrong_secret_and_a_moved_address_end_with_messages(person, registered, mcp_server, caplog):
    for name in ("mcp", "httpx2", "httpcore2", "chat"):
        caplog.set_level(logging.DEBUG, logger=name)
    McpServer.objects.filter(pk=registered.pk).update(headers={"Authorization": "Bearer wrong"})
    refused = call("lookup_ticket", person, {"number": 1})
    assert refused.text == f"The tool server {registered.name} refused the credentials (HTTP 401): check its headers."
    # The host name resolves elsewhere than when staff saved it: refused before any request.
    before = mcp_server.state()["calls"]
    localhost = mcp_server.url.replace("127.0.0.1", "localhost")
    headers = {"Authorization": f"Bearer {mcp_server.secret}"}
    McpServer.objects.filter(pk=registered.pk).update(url=localhost, headers=headers, addresses=["10.255.255.1"])
    moved = call("lookup_ticket", person, {"number": 1})
    assert moved.is_error and moved.text.startswith("The server's host name localhost now resolves to 127.0.0.1")
    assert mcp_server.state()["calls"] == before
    # Saved again by staff: the name's addresses now are pinned, and the call goes through.
    services.save_server(registered.pk, services.ServerValues(registered.name, localhost))
    assert "127.0.0.1" in McpServer.objects.get(pk=registered.pk).addresses
    assert call("lookup_ticket", person, {"number": 1}).text.startswith("Ticket 1:")
    # Down: nothing listens at the address any more.
    closed = LoopbackServer(BaseHTTPRequestHandler)
    closed.close()
    McpServer.objects.filter(pk=registered.pk).update(url=f"{closed.url}/mcp", addresses=["127.0.0.1"])
    down = call("lookup_ticket", person, {"number": 1})
    assert down.is_error and down.text == f"The tool server {registered.name} could not be reached."
    # Every log line of these calls, down to the SDK's and the HTTP library's debug lines: no secret.
    assert "POST" in caplog.text and f"{registered.name}: The tool server" in caplog.text
    assert mcp_server.secret not in caplog.text


def test_a_redirect_to_another_host_is_refused(mcp_server, staff_page):
    target = mcp_server.url.replace("127.0.0.1", "localhost")

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (the standard library's name)
            self.send_response(307)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST  # noqa: N815

        def log_message(self, *args):
            pass

    redirector = LoopbackServer(Redirect)
    name = f"moved-{uuid.uuid4().hex[:6]}"
    try:
        before = mcp_server.state()["calls"]
        page = staff_page.post(
            "/staff/tools/new/",
            {"name": name, "url": f"{redirector.url}/mcp", "headers": f"Authorization: Bearer {mcp_server.secret}"},
            follow=True,
        ).content.decode()
        row = McpServer.objects.get(name=name)
        message = f"The tool server {name} answered with a redirect, which is not followed: register its final address."
        assert row.list_error == message
        assert message in re.sub(r"\s+", " ", page)
        assert not McpTool.objects.filter(server=row).exists()
        assert mcp_server.state()["calls"] == before
        assert selectors.server(row.pk).listed_at is None
    finally:
        redirector.close()
        McpServer.objects.filter(name=name).delete()
