"""How the local llama-server is started: the default profile and its argv.

The profiles issue turns this into stored, admin-edited profiles; the argv is always
a list (never a shell string), and the API key travels in the environment, not argv,
so it does not show in ``ps``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

TEMPLATES_DIR = Path(__file__).resolve().parent / "chat_templates"
# Model files whose metadata carries no chat template get one from here.
FALLBACK_TEMPLATES = {"gemma-3-270m-q4_k_m.gguf": TEMPLATES_DIR / "gemma3.jinja"}


@dataclass
class LaunchProfile:
    model_path: Path
    ctx_size: int
    parallel: int
    host: str
    port: int
    threads: int = 0
    chat_template_file: Path | None = None
    extra_args: list[str] = field(default_factory=list)

    def argv(self, binary: str) -> list[str]:
        args = [
            binary,
            "--model",
            str(self.model_path),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--ctx-size",
            str(self.ctx_size),
            "--parallel",
            str(self.parallel),
            "--metrics",
            "--slots",
            "--no-webui",
        ]
        if self.threads:
            args += ["--threads", str(self.threads)]
        if self.chat_template_file:
            args += ["--chat-template-file", str(self.chat_template_file)]
        return args + self.extra_args


def default_profile() -> LaunchProfile:
    url = urlsplit(settings.LLAMA_SERVER_URL)
    model_path = settings.MODELS_DIR / settings.DEFAULT_MODEL_FILE
    return LaunchProfile(
        model_path=model_path,
        ctx_size=settings.LLAMA_CTX_SIZE,
        parallel=settings.LLAMA_PARALLEL,
        host=url.hostname or "127.0.0.1",
        port=url.port or 8081,
        threads=settings.LLAMA_THREADS,
        chat_template_file=FALLBACK_TEMPLATES.get(settings.DEFAULT_MODEL_FILE),
    )


def llama_server_binary() -> str:
    explicit = os.environ.get("LLAMA_SERVER_BIN")
    if explicit:
        return explicit
    found = shutil.which("llama-server")
    if found:
        return found
    raise FileNotFoundError("llama-server not found: set LLAMA_SERVER_BIN or run `make setup`")


def llama_environment() -> dict[str, str]:
    """Environment for the llama-server process: the API key, nothing on argv."""
    env = dict(os.environ)
    env["LLAMA_API_KEY"] = settings.LLAMA_API_KEY
    return env
