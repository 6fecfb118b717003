"""A real MCP server for the tests: the official SDK's `MCPServer` over Streamable HTTP, in its own
process, on a free loopback port (`python -m tests.support.mcp_server SECRET`; it prints its port).

Every MCP request must carry ``Authorization: Bearer SECRET`` (so the tests see the app send the
headers staff entered). Its tools:

- ``lookup_ticket`` (reads) and ``create_ticket`` (writes), plain answers;
- ``floor_status`` (reads) and ``order_toner`` (writes): their one argument's schema is the constant 3,
  so llama-server's tool grammar writes a call of them whole (the chat turn's tests,
  tests/integration/test_mcp_in_chat.py: a string argument is free text the grammar does not hold to
  a constant, which the wired model writes as the built-ins' ``(6*7)``, so the chat tests give the
  tools of constant arguments); each counts its calls;
- ``slow_lookup``: waits until the test releases it (``POST /release``); ``GET /state`` says how many
  calls wait there now (and how many came), so a test waits on that, never on the clock;
- ``broken_tool``: raises; ``huge_result``: answers 50 MB of text (``slow_lookup`` and ``broken_tool``
  take the constants 7 and 1, ``huge_result`` nothing, so a chat turn's model can call them too);
- ``bad_schema``: listed with an input schema that is not valid JSON schema (the SDK builds every
  schema from a function's signature, so this one's listed schema is replaced after registration).

``McpTestServer`` starts and stops it for a fixture.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Literal

HUGE_BYTES = 50 * 1024 * 1024
FLOOR_STATUS = "Printers 3A and 3C work; 3B waits for toner"
ROOT = Path(__file__).resolve().parents[2]


def _build(secret: str):
    from mcp.server.mcpserver import MCPServer
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    server = MCPServer("office-tickets")
    release = asyncio.Event()
    waiting = {"now": 0, "calls": 0, "floor_calls": 0, "toner_orders": 0, "slow_calls": 0}

    @server.tool(description="Look a ticket up by its number.")
    def lookup_ticket(number: int) -> str:
        waiting["calls"] += 1
        return f"Ticket {number}: printer on floor 3 is out of toner (open)."

    @server.tool(description="Open a new ticket.")
    def create_ticket(title: str, priority: str = "normal") -> str:
        waiting["calls"] += 1
        return f"Created ticket 4711: {title} ({priority})."

    @server.tool(description="Which printers work on a floor.")
    def floor_status(floor: Literal[3]) -> str:
        waiting["floor_calls"] += 1
        return f"{FLOOR_STATUS} (floor {floor})"

    @server.tool(description="Order toner for a floor's printers.")
    def order_toner(floor: Literal[3]) -> str:
        waiting["toner_orders"] += 1
        return f"Toner ordered for floor {floor}."

    @server.tool(description="Look a ticket up, slowly.")
    async def slow_lookup(number: Literal[7]) -> str:
        waiting["slow_calls"] += 1
        waiting["now"] += 1
        try:
            await release.wait()
        finally:
            waiting["now"] -= 1
        return f"Ticket {number}, at last."

    @server.tool(description="Always fails.")
    def broken_tool(number: Literal[1]) -> str:
        raise RuntimeError("the ticket database is on fire")

    @server.tool(description="Answers far too much.")
    def huge_result() -> str:
        return "x" * HUGE_BYTES

    @server.tool(description="Its schema is broken.")
    def bad_schema(number: int) -> str:
        return str(number)

    server._tool_manager.get_tool("bad_schema").parameters = {
        "type": "object",
        "properties": {"number": {"type": "integer", "minimum": "not a number"}},
    }

    @server.custom_route("/release", methods=["POST"])
    async def release_slow(request: Request) -> JSONResponse:
        release.set()
        return JSONResponse({"released": True})

    @server.custom_route("/state", methods=["GET"])
    async def state(request: Request) -> JSONResponse:
        return JSONResponse(waiting)

    app = server.streamable_http_app(host="127.0.0.1")

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {secret}".encode():
                response = JSONResponse({"error": "unauthorized"}, status_code=401)
                await response(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    import uvicorn

    secret = sys.argv[1]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(_build(secret), log_level="warning", lifespan="on")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


class McpTestServer:
    """The server above in a child process, for one test module."""

    def __init__(self, secret: str = "mcp-secret-7b2f1c") -> None:
        self.secret = secret
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.mcp_server", secret],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.port = int(self.process.stdout.readline())
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        self._wait_ready()

    def _wait_ready(self) -> None:
        # The socket listens before the app serves: this first request waits in its backlog until it does.
        try:
            self.state()
        except OSError:
            self.stop()
            raise

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.base}/state", timeout=10) as response:
            return json.loads(response.read())

    def release(self) -> None:
        request = urllib.request.Request(f"{self.base}/release", method="POST", data=b"")
        urllib.request.urlopen(request, timeout=10).close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


if __name__ == "__main__":
    main()
