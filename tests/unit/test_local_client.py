"""One kept client per llama-server address (``monitor.llama.client.client_at``), at most KEPT_CLIENTS of
them, least recently used dropped; ``local_client`` (this node's own llama-server) follows the settings;
announce asks llama-server through it, with its key; the serving-info cache is bounded likewise.

Fake upstream, named as such: a loopback server that answers ``/health`` only to the right key.
"""

from __future__ import annotations

import asyncio
from http.server import BaseHTTPRequestHandler

from django.test import override_settings

from monitor.llama import client as llama_client
from monitor.llama import serving
from monitor.llama.client import KEPT_CLIENTS, LlamaClient, client_at, local_client
from monitor.management.commands.announce import llama_ready
from tests.support.loopback import LoopbackServer


def test_a_client_is_kept_per_address_and_the_least_recently_used_goes_first():
    first = client_at("http://127.0.0.1:9/", "key", "chat@1")
    assert client_at("http://127.0.0.1:9", "key", "chat@1") is first
    assert client_at("http://127.0.0.1:9", "other key", "chat@1") is not first
    used = client_at("http://127.0.0.1:9", "key", "used@1")
    for port in range(KEPT_CLIENTS - 1):
        client_at(f"http://127.0.0.1:{10_000 + port}", "key", None)
        assert client_at("http://127.0.0.1:9", "key", "used@1") is used  # kept while it is used
    assert len(llama_client._kept) == KEPT_CLIENTS
    assert client_at("http://127.0.0.1:9", "key", "chat@1") is not first  # dropped, made again


def test_the_local_client_follows_the_settings():
    with override_settings(LLAMA_SERVER_URL="http://127.0.0.1:9/", LLAMA_API_KEY="before"):
        before = local_client()
        assert (before.base_url, before.api_key, before.model) == ("http://127.0.0.1:9", "before", None)
        assert local_client() is before and local_client("chat@1").model == "chat@1"
        with override_settings(LLAMA_API_KEY="after"):
            assert local_client().api_key == "after"


class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        allowed = self.path == "/health" and self.headers.get("Authorization") == "Bearer secret"
        body = b'{"status":"ok"}' if allowed else b'{"error":"Invalid API Key"}'
        self.send_response(200 if allowed else 401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_announce_asks_llama_server_with_its_key():
    server = LoopbackServer(Health)
    try:
        with override_settings(LLAMA_SERVER_URL=server.url, LLAMA_API_KEY="secret"):
            assert llama_ready()
        with override_settings(LLAMA_SERVER_URL=server.url, LLAMA_API_KEY="wrong"):
            assert not llama_ready()
    finally:
        server.close()
    with override_settings(LLAMA_SERVER_URL=server.url, LLAMA_API_KEY="secret"):
        assert not llama_ready()  # nothing listens any more


class StandIn(LlamaClient):
    def __init__(self, model: str):
        super().__init__(base_url="http://127.0.0.1:9", api_key="", model=model)
        self.asked = 0

    async def get_json(self, path: str, *args, **kwargs) -> dict:
        assert path == "/props"
        self.asked += 1
        return {"model_alias": self.model, "total_slots": 1, "n_ctx": 4096}


def test_the_serving_info_cache_keeps_the_latest_reads_only():
    oldest, *others = [StandIn(f"model-{n}@1") for n in range(serving.CACHE_ENTRIES + 1)]
    for server in [oldest, *others]:
        asyncio.run(serving.serving_info(server))
    asyncio.run(serving.serving_info(others[-1]))
    assert others[-1].asked == 1  # cached
    assert len(serving._cache) == serving.CACHE_ENTRIES
    asyncio.run(serving.serving_info(oldest))
    assert oldest.asked == 2  # the oldest read was dropped
