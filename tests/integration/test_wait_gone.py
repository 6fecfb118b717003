"""``wait_gone``: a killed instance counts as gone only once its router says so. A router that does not
answer says nothing of it (seen in a whole-suite run: node-b's router frozen while its instance was
killed, the wait took the frozen router's silence for "gone", the load that followed found the dead
instance still listed as loaded once the router was let go, skipped, and the node never served again)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import httpx
import pytest

from monitor.llama.client import LlamaClient, local_client
from monitor.profiles.loading import wait_gone
from tests.support.stack import free_port, wait_until


@pytest.fixture
def frozen_server():
    """A real HTTP server process, frozen (SIGSTOP): connections are accepted by the kernel, never answered."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)], cwd="/")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: httpx.get(url, timeout=2).status_code == 200, 30, "the HTTP server", process)
        os.kill(process.pid, signal.SIGSTOP)
        yield url
    finally:
        os.kill(process.pid, signal.SIGCONT)
        process.kill()
        process.wait(10)


def test_a_router_that_does_not_answer_is_no_sign_the_instance_is_gone(frozen_server):
    assert asyncio.run(wait_gone(LlamaClient(base_url=frozen_server), "chat-8k@1", timeout_s=2)) is False


def test_a_router_that_is_not_there_is_no_sign_either():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: each ask is refused
    assert asyncio.run(wait_gone(LlamaClient(base_url=url), "chat-8k@1", timeout_s=1)) is False


def test_an_instance_the_router_does_not_list_is_gone(llama_server):
    assert asyncio.run(wait_gone(local_client(), "never-loaded@1", timeout_s=30)) is True
