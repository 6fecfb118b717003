"""The llama-server options a profile produces, in order: the one source for the argv, the presets and the page.

No value ever passes through a shell: the argv is a list and the command line shown
to admins is quoted with ``shlex.join``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from monitor.llama.binary import llama_server_binary
from monitor.models import ServerProfile
from monitor.profiles.allowed_options import absolute_value


def model_path(name: str) -> Path:
    return Path(settings.MODELS_DIR) / name


def template_file(profile: ServerProfile) -> Path:
    # Named by content: a revision still serving keeps its own template while a new one loads.
    digest = hashlib.sha256(profile.chat_template_jinja.encode()).hexdigest()[:16]
    return Path(settings.VAR_DIR) / "chat_templates" / f"template-{digest}.jinja"


Option = tuple[str, str | None]  # ("--ctx-size", "8192"), or ("--metrics", None) for a flag


def threads_for(profile: ServerProfile) -> int:
    """The profile's own thread count, else the box's (QWENWEB_LLAMA_THREADS; -1: llama-server's choice)."""
    return profile.threads if profile.threads > 0 else settings.LLAMA_DEFAULT_THREADS


def profile_options(profile: ServerProfile) -> list[Option]:
    """A local profile's llama-server options, in order; the one source for argv and presets."""
    options: list[Option] = [
        ("--model", str(model_path(profile.model_file))),
        ("--ctx-size", str(profile.ctx_size)),
        ("--n-gpu-layers", profile.gpu_layers),
        ("--batch-size", str(profile.batch_size)),
        ("--ubatch-size", str(profile.ubatch_size)),
        ("--threads", str(threads_for(profile))),
        ("--cache-type-k", profile.cache_type_k),
        ("--cache-type-v", profile.cache_type_v),
        ("--flash-attn", profile.flash_attn),
        ("--parallel", str(profile.parallel)),
    ]
    if profile.kind == ServerProfile.Kind.EMBEDDING:
        options += [("--embeddings", None), ("--pooling", profile.pooling)]
    elif profile.kind == ServerProfile.Kind.RERANK:
        options.append(("--reranking", None))  # llama-server sets its pooling to rank
    else:
        options += _chat_options(profile)
    if profile.n_cpu_moe:
        options.append(("--n-cpu-moe", str(profile.n_cpu_moe)))
    if profile.is_chat:
        options += _chat_files(profile)
    # Files named in extra arguments are names in the models (or templates) folder; llama-server gets their paths.
    return options + [(name, absolute_value(name, value)) for name, value in split_options(profile.extra_args)]


def _chat_options(profile: ServerProfile) -> list[Option]:
    """Reasoning and sampling: a chat profile's alone (an embedding or reranking model generates nothing)."""
    return [
        ("--reasoning", profile.reasoning),
        ("--reasoning-budget", str(profile.reasoning_budget)),
        ("--temp", str(profile.temperature)),
        ("--top-p", str(profile.top_p)),
        ("--top-k", str(profile.top_k)),
        ("--min-p", str(profile.min_p)),
        ("--repeat-penalty", str(profile.repeat_penalty)),
    ]


def _chat_files(profile: ServerProfile) -> list[Option]:
    """The draft model, the vision projector and the chat template, after the MoE option as before kinds."""
    options: list[Option] = []
    if profile.draft_model_file:
        options += [
            ("--model-draft", str(model_path(profile.draft_model_file))),
            ("--spec-draft-n-max", str(profile.draft_max)),
            ("--spec-draft-n-min", str(profile.draft_min)),
        ]
    if profile.mmproj_file:
        options.append(("--mmproj", str(model_path(profile.mmproj_file))))
    if profile.chat_template_jinja.strip():
        options.append(("--chat-template-file", str(template_file(profile))))
    elif profile.chat_template:
        # A name is only read as a built-in template when Jinja is off (with Jinja on it is literal Jinja).
        options += [("--no-jinja", None), ("--chat-template", profile.chat_template)]
    return options


def split_options(extra_args: str) -> list[Option]:
    """Extra arguments as options: a token that is not an option is the value of the one before."""
    options: list[Option] = []
    for token in shlex.split(extra_args or ""):
        if token.startswith("-") and not re.match(r"^-\d", token):
            name, _sep, value = token.partition("=")
            options.append((name, value or None))
        elif options and options[-1][1] is None:
            options[-1] = (options[-1][0], token)
        else:
            options.append((token, None))  # validation has already refused a stray value
    return options


def options_argv(options: list[Option]) -> list[str]:
    return [part for option in options for part in option if part is not None]  # a flag has no value


SERVER_FLAGS: list[Option] = [("--metrics", None), ("--slots", None), ("--no-webui", None)]


def profile_argv(profile: ServerProfile, binary: str, *, host: str, port: int) -> list[str]:
    """The exact standalone llama-server command line of a profile (the API key travels in the environment)."""
    server: list[Option] = [("--host", host), ("--port", str(port)), *SERVER_FLAGS]
    return [binary, *options_argv(profile_options(profile)[:1] + server + profile_options(profile)[1:])]


def command_line(profile: ServerProfile) -> str:
    """The profile as one command to paste into a terminal (values quoted for a POSIX shell)."""
    url = urlsplit(settings.LLAMA_SERVER_URL)
    try:
        binary = llama_server_binary()
    except FileNotFoundError:
        binary = "llama-server"
    return shlex.join(profile_argv(profile, binary, host=url.hostname or "127.0.0.1", port=url.port or 8081))


def write_template(profile: ServerProfile) -> None:
    if profile.is_chat and profile.chat_template_jinja.strip():
        path = template_file(profile)
        if path.exists():
            return  # named by its content: an instance may be reading it, and it is already right
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        partial.write_text(profile.chat_template_jinja)
        os.replace(partial, path)
