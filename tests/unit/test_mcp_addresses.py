"""What staff may enter for an MCP server, checked where it enters: the URL (scheme, no credentials or
query in it, no unusable address) and the header lines (well formed, none the transport sets itself)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from chat.tools.mcp.addresses import parse_url
from chat.tools.mcp.errors import McpError
from chat.tools.mcp.forms import parse_headers


def test_a_url_is_taken_apart_as_staff_typed_it():
    literal = parse_url(" http://127.0.0.1:8931/mcp ")
    assert (literal.url, literal.scheme, literal.host, literal.port, literal.literal) == (
        "http://127.0.0.1:8931/mcp",
        "http",
        "127.0.0.1",
        8931,
        True,
    )
    named = parse_url("https://Tools.Office.LAN/mcp")
    assert (named.host, named.port, named.literal) == ("tools.office.lan", 443, False)
    assert parse_url("http://[::1]:9000/mcp").host == "::1"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://10.0.0.5/mcp", "Give the server's address as an http:// or https:// URL."),
        ("10.0.0.5/mcp", "Give the server's address as an http:// or https:// URL."),
        ("http://10.0.0.5:99999/mcp", "Give the server's address as an http:// or https:// URL."),
        ("http://10.0.0.5/m cp", "Give the server's address as an http:// or https:// URL."),
        ("http://admin:pw@10.0.0.5/mcp", "The address may not carry a user name, password or query"),
        ("http://admin@10.0.0.5/mcp", "The address may not carry a user name, password or query"),
        ("http://10.0.0.5/mcp?token=abc", "The address may not carry a user name, password or query"),
        ("http://169.254.169.254/latest", "The server's address 169.254.169.254 cannot be used."),
        ("http://0.0.0.0:8000/mcp", "The server's address 0.0.0.0 cannot be used."),
        ("http://224.0.0.1/mcp", "The server's address 224.0.0.1 cannot be used."),
    ],
)
def test_a_url_that_could_carry_a_secret_or_go_elsewhere_is_refused(url, message):
    with pytest.raises(McpError) as refused:
        parse_url(url)
    assert str(refused.value).startswith(message)


def test_header_lines_are_checked():
    assert parse_headers("Authorization: Bearer a:b\n\nX-Office:  third floor ") == {
        "Authorization": "Bearer a:b",
        "X-Office": "third floor",
    }
    for text, message in [
        ("Authorization Bearer x", "Header line 1 is not of the form Name: value."),
        ("X-Ok: 1\nBad Name: x", "Header line 2 is not of the form Name: value."),
        ("X-Empty:", "Header line 1 is not of the form Name: value."),
        ("X-Split: a\x0bb", "Header line 1 is not of the form Name: value."),
        ("Host: elsewhere.example", "The header Host is set by the MCP client itself."),
        ("mcp-session-id: 1", "The header mcp-session-id is set by the MCP client itself."),
        ("\n".join(f"X-{n}: v" for n in range(21)), "Too many headers (the most is 20)."),
    ]:
        with pytest.raises(ValidationError) as refused:
            parse_headers(text)
        assert refused.value.messages == [message]
