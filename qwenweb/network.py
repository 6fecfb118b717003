"""Where the box is reached: its LAN addresses and names (settings derive ALLOWED_HOSTS from them)."""

from __future__ import annotations

import socket

import psutil

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def lan_addresses() -> list[str]:
    """The box's IPv4 addresses other than loopback: where people on the LAN reach it."""
    return [
        entry.address
        for entries in psutil.net_if_addrs().values()
        for entry in entries
        if entry.family == socket.AF_INET and not entry.address.startswith("127.")
    ]


def served_hosts() -> list[str]:
    """Every Host header a person on the LAN (or on the box itself) may send: loopback, the box's own
    name bare and as mDNS announces it (`name.local`), its LAN addresses."""
    bare = socket.gethostname().strip().lower().removesuffix(".local")
    names = [bare, f"{bare}.local"] if bare else []
    return list(dict.fromkeys([*LOOPBACK_HOSTS, *names, *lan_addresses()]))


def node_name_from_host() -> str:
    """This box's default name as an inference node: its host name, as a slug (``[a-z0-9-]``)."""
    bare = (socket.gethostname().strip().lower() or "box").split(".")[0]
    slug = "".join(char if char.isascii() and char.isalnum() else "-" for char in bare).strip("-")
    return slug[:48] or "box"
