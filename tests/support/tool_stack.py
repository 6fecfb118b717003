"""What the tool loop's tests run against: a web process offering the test tools (or the product's own,
tests/support/tool_web.py) and a profile of the wired Qwen3.5 model whose ``--grammar`` writes the
answer once no more tools are asked."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.support import stack
from tests.support.client import talking_to
from tests.support.qwen35 import GRAMMAR, serving_profile


@contextlib.contextmanager
def tool_web_server(run_dir: Path, *, product_tools: bool = False, **settings: str) -> Iterator[stack.Service]:
    """A web process with the test tools (``product_tools``: the product's own) on a port of its own
    (``settings``: QWENWEB_* for it); while the block runs, the test client's helpers
    (tests/support/client.py) talk to it."""
    port = str(stack.free_port())
    env = {**os.environ, "QWENWEB_PORT": port, **settings}
    chosen = ["--product-tools"] if product_tools else []
    argv = [sys.executable, "-m", "tests.support.tool_web", *chosen, "--bind", "127.0.0.1", "--port", port]
    service = stack.Service("daphne-tools", argv, run_dir, env)
    service.start()
    url = f"http://127.0.0.1:{port}/login/"
    stack.wait_until(lambda: httpx.get(url, timeout=2).status_code == 200, 60, "daphne-tools", service.process)
    try:
        with talking_to(port):
            yield service
    finally:
        service.stop()


@contextlib.contextmanager
def tools_profile() -> Iterator:
    models = Path(os.environ["QWENWEB_MODELS_DIR"])
    with serving_profile(models, "qwen35-tools", extra_args=f"--grammar {shlex.quote(GRAMMAR)}") as profile:
        yield profile
