"""Where an MCP server may be reached: the address exactly as staff entered it, and nowhere else.

The rule (docs/tools.md, "MCP servers"):

- an `http://` or `https://` URL with a host, no user name or password in it, no query or fragment
  (credentials go in headers, which are never shown back);
- a host written as an IP address is that address, never looked up;
- a host name is looked up when staff save the server, and the addresses it gave are kept (pinned);
- at each call the name is looked up once; if any address it gives now is not among the pinned ones the
  call is refused (staff save the server again to accept a change), else the call connects to that
  address (every request of the call to the same one: no second look-up to be fooled by);
- an unspecified, multicast or link-local address (where cloud metadata services live) is refused.
  Loopback and private LAN addresses are allowed: that is where an office's servers are.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
from django.utils.translation import gettext as _

from chat.tools.mcp.errors import McpError

URL_MAX_CHARS = 500


@dataclass(frozen=True)
class Endpoint:
    """A server's URL taken apart: what each request is checked against."""

    url: str
    scheme: str
    host: str  # lower case, IPv6 without brackets
    port: int
    literal: bool  # the host is written as an IP address


def parse_url(url: str) -> Endpoint:
    """The URL checked as staff typed it; raises McpError naming what is wrong."""
    url = url.strip()
    if not url or len(url) > URL_MAX_CHARS or any(char.isspace() for char in url):
        raise McpError(_("Give the server's address as an http:// or https:// URL."))
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise McpError(_("Give the server's address as an http:// or https:// URL.")) from error
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise McpError(_("Give the server's address as an http:// or https:// URL."))
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise McpError(_("The address may not carry a user name, password or query: put credentials in a header."))
    host = parts.hostname.lower()
    literal = _as_ip(host) is not None
    if literal:
        _check_usable(host)
    return Endpoint(url, parts.scheme, host, port or (443 if parts.scheme == "https" else 80), literal)


def _as_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _check_usable(address: str) -> str:
    ip = _as_ip(address)
    if ip is None or ip.is_unspecified or ip.is_multicast or ip.is_link_local:
        raise McpError(_("The server's address %(address)s cannot be used.") % {"address": address})
    return str(ip)


async def _look_up(endpoint: Endpoint) -> list[str]:
    try:
        answers = await anyio.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise McpError(
            _("The server's host name %(name)s could not be looked up.") % {"name": endpoint.host}
        ) from error
    found: list[str] = []
    for _family, _type, _proto, _name, sockaddr in answers:
        address = str(sockaddr[0]).split("%", 1)[0]
        if address not in found:
            found.append(address)
    return found


async def addresses_to_pin(endpoint: Endpoint) -> list[str]:
    """What a save keeps: the literal address, or every address the name resolves to now."""
    if endpoint.literal:
        return [_check_usable(endpoint.host)]
    return [_check_usable(address) for address in await _look_up(endpoint)]


async def address_for_call(endpoint: Endpoint, pinned: list[str]) -> str:
    """The one address this call connects to; raises McpError when the name now resolves elsewhere."""
    if endpoint.literal:
        return _check_usable(endpoint.host)
    found = await _look_up(endpoint)
    allowed = set(pinned)
    stray = [address for address in found if address not in allowed]
    if stray or not found:
        raise McpError(
            _(
                "The server's host name %(name)s now resolves to %(addresses)s, not to the addresses it had "
                "when it was saved; staff can save the server again to accept them."
            )
            % {"name": endpoint.host, "addresses": ", ".join(stray or ["?"])}
        )
    return found[0]
