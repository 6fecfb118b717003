"""A joined node's side of its membership: what it saved when it joined, and its calls to the main box.

`make node` (``scripts/node.py``) joins with a one-time token (``POST /nodes/join/``) and saves what
the main box answered in ``var/node.json`` (mode 0600): its name, its credential, its llama-server API
key, its Redis user and the database. At every later start it registers again with that credential
(``POST /nodes/register/``), sending its facts and its address. While it runs, its heartbeat asks the
main box whether it is still a member (``POST /nodes/check/``) when Redis or the database refuse it: a
node removed on the staff page loses its Redis user (and its database role) at once, and is stopped,
saying why, instead of retrying forever.

No Django here: `make node` calls it before any setting exists.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import quote

import httpx

from monitor.nodes.private_files import write_private

NODE_FILE = "node.json"
REMOVED_FILE = "node-removed"  # in var/run/: why the node stopped (its supervisor wrote it)
TIMEOUT_S = 30.0


class Refused(Exception):
    """The main box said no (403, 400, 429): ``str()`` is its message, in the node's language."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class Unreachable(Exception):
    """The main box did not answer (or not as a qwenweb box does)."""


@dataclass
class Saved:
    """What a node keeps of its join (var/node.json)."""

    main: str  # the main box's address, as `make node MAIN=...` gave it
    name: str
    credential: str  # proves the node to the main box (only its SHA-256 is kept there)
    llama_api_key: str  # the key its router wants (the main box keeps it to reach the router)
    listen: str  # where its router listens (LLAMA_SERVER_URL of its processes)
    url: str  # where the main box reaches its router
    redis: dict = field(default_factory=dict)  # host, port, db, username, password
    database: dict = field(default_factory=dict)  # engine; sqlite: path; postgresql: host, port, name, user, password

    def redis_url(self) -> str:
        redis = self.redis
        user, password = quote(redis["username"], safe=""), quote(redis["password"], safe="")
        return f"redis://{user}:{password}@{_host(redis['host'])}:{redis['port']}/{redis.get('db', 0)}"

    def database_url(self) -> str:
        database = self.database
        if database["engine"] == "sqlite":
            return f"sqlite:///{database['path']}"
        user, password = quote(database["user"], safe=""), quote(database["password"], safe="")
        where = f"{_host(database['host'])}:{database['port']}"
        return f"postgres://{user}:{password}@{where}/{quote(database['name'], safe='')}"

    def update_addresses(self, answer: dict) -> None:
        """The main box's registration answer: where its Redis and database are now (a restart may move a port)."""
        self.redis = {**self.redis, **answer.get("redis", {})}
        self.database = {**self.database, **answer.get("database", {})}


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def path_of(var_dir: Path) -> Path:
    return var_dir / NODE_FILE


def load(var_dir: Path) -> Saved | None:
    try:
        return Saved(**json.loads(path_of(var_dir).read_text()))
    except FileNotFoundError:
        return None


def save(var_dir: Path, saved: Saved) -> None:
    """Written whole, readable by this user only (it holds the node's credentials)."""
    write_private(path_of(var_dir), json.dumps(asdict(saved), indent=1))


def removed_path(var_dir: Path) -> Path:
    return var_dir / "run" / REMOVED_FILE


def removed_message(main: str, why: str) -> str:
    """What a removed node says on its console and in its log."""
    return f"this node was removed from {main}: {why}"


def console_language() -> str:
    """The language the main box answers in: the node's locale (LANG), Chinese or English."""
    locale = os.environ.get("LC_ALL") or os.environ.get("LC_MESSAGES") or os.environ.get("LANG") or ""
    return "zh-hans" if locale.lower().startswith("zh") else "en"


def call(main: str, path: str, payload: dict, credential: str = "") -> dict:
    """POST ``payload`` as JSON to the main box; its JSON answer. Refused: it said no, with its message."""
    headers = {"Accept-Language": console_language()}
    if credential:
        headers["Authorization"] = f"Bearer {credential}"
    try:
        response = httpx.post(main.rstrip("/") + path, json=payload, headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as error:
        raise Unreachable(f"{main} did not answer: {error}") from error
    try:
        answer = response.json()
    except ValueError:
        answer = {}
    if response.status_code in (400, 403, 413, 429):
        raise Refused(answer.get("error") or response.text[:500], response.status_code)
    if response.status_code != 200 or not isinstance(answer, dict):
        raise Unreachable(f"{main} answered {response.status_code} to {path}: {response.text[:300]}")
    return answer


def join(main: str, token: str, name: str, url: str, facts: dict) -> dict:
    return call(main, "/nodes/join/", {"token": token, "name": name, "url": url, "facts": facts})


def register(saved: Saved, url: str, facts: dict) -> dict:
    return call(saved.main, "/nodes/register/", {"name": saved.name, "url": url, "facts": facts}, saved.credential)


def check(saved: Saved) -> None:
    """Refused when the main box no longer has this node; Unreachable when it did not say."""
    call(saved.main, "/nodes/check/", {"name": saved.name}, saved.credential)
