"""Validation of every field of a server profile, with one message per field.

Extra arguments are split with shlex and each option must be on the reviewed allowlist
(``allowed_options``) with a value of its kind, and listed by llama-server's own ``--help``;
files must be whole GGUF files in the models folder.
"""

from __future__ import annotations

import functools
import re
import shlex
import subprocess

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from monitor.catalog.planner import CACHE_TYPE_BYTES
from monitor.catalog.registry import NotGGUF, read_model_info
from monitor.llama.binary import llama_server_binary
from monitor.llama.client import run_with_client
from monitor.llama.errors import LlamaRejected, LlamaUnavailable
from monitor.models import ServerProfile
from monitor.profiles.allowed_options import ALLOWED, KIND_OPTIONS, chat_only, value_problem
from monitor.profiles.options import model_path, split_options

# Built-in templates llama-server names in its --help (tools/server/README.md of the pinned version).
BUILTIN_TEMPLATES = (
    "bailing bailing-think bailing2 chatglm3 chatglm4 chatml command-r deepseek deepseek-ocr deepseek2 deepseek3 "
    "exaone-moe exaone3 exaone4 falcon3 gemma gigachat glmedge gpt-oss granite granite-4.0 granite-4.1 grok-2 "
    "hunyuan-dense hunyuan-moe hunyuan-vl kimi-k2 llama2 llama2-sys llama2-sys-bos llama2-sys-strip llama3 llama4 "
    "megrez minicpm mistral-v1 mistral-v3 mistral-v3-tekken mistral-v7 mistral-v7-tekken monarch openchat orion "
    "pangu-embedded phi3 phi4 rwkv-world seed_oss smolvlm solar-open vicuna vicuna-orca yandex zephyr"
).split()
# The router reads presets as INI: these would end a value early or start a new line.
UNSAFE_IN_VALUES = (";", "#", "\n", "\r", "[", "]")
RANGES = {
    "ctx_size": (256, 4_194_304),
    "n_cpu_moe": (0, 1000),
    "batch_size": (1, 1_048_576),
    "ubatch_size": (1, 1_048_576),
    "threads": (-1, 1024),
    "parallel": (1, 256),
    "draft_max": (0, 256),
    "draft_min": (0, 256),
    "reasoning_budget": (-1, 1_048_576),
    "hang_limit_s": (2, 3600),
    "temperature": (0.0, 5.0),
    "top_p": (0.0, 1.0),
    "top_k": (0, 100_000),
    "min_p": (0.0, 1.0),
    "repeat_penalty": (0.0, 5.0),
}


@functools.lru_cache(maxsize=4)
def known_options(binary: str) -> frozenset[str]:
    """Every option name llama-server lists in its --help."""
    output = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30).stdout
    names = set()
    for line in output.splitlines():
        if line.startswith("-"):
            head = re.split(r"(?<![,\s])\s{2,}", line, maxsplit=1)[0]  # "-rea,  --reasoning [..]   description"
            names.update(re.findall(r"(?<![\w-])(--?[A-Za-z][\w.-]*)", head))
    return frozenset(names)


NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_remote(url: str, api_key: str, model: str) -> str | None:
    """Why a remote llama-server cannot be used (None when it answers with that key and model)."""
    try:
        listing = run_with_client(
            lambda client: client.get_json("/v1/models"), base_url=url, api_key=api_key, timeout=5
        )
    except LlamaUnavailable:
        return _("No llama-server answers at %(url)s.") % {"url": url}
    except LlamaRejected as error:
        if error.status in (401, 403):
            return _("The server at %(url)s refused the API key.") % {"url": url}
        return _("The server at %(url)s answered with an error: %(error)s") % {"url": url, "error": error}
    except ValueError:
        return _("The server at %(url)s is not a llama-server (its answer is not JSON).") % {"url": url}
    ids = [item.get("id") for item in (listing or {}).get("data", []) if isinstance(item, dict)]
    if model and model not in ids:
        return _("The server at %(url)s has no model %(model)s; it serves: %(ids)s.") % {
            "url": url,
            "model": model,
            "ids": ", ".join(map(str, ids)) or "—",
        }
    return None


def _check_file(errors: dict, field: str, name: str):
    if not name:
        return None
    if "/" in name or "\\" in name or name.startswith("."):
        errors[field] = _("Give a file name from the models directory, not a path.")
        return None
    path = model_path(name)
    # A plain name (checked above), so it cannot climb out; a symlink the box's administrator put in
    # the folder (models on another disk) is honoured, unlike files named in extra arguments.
    if not path.is_file():
        errors[field] = _("%(name)s is not in the models directory.") % {"name": name}
        return None
    try:
        return read_model_info(path)
    except NotGGUF as error:
        errors[field] = str(error)
        return None


def extra_args_problem(extra_args: str, known: frozenset[str] | None, *, chat: bool = True) -> str | None:
    """The first problem of the extra arguments: an option not allowed, unknown to llama-server, or a bad value;
    one the profile's kind sets; one that means something only to a chat profile (``chat`` False)."""
    for option, value in split_options(extra_args):
        if not option.startswith("-"):
            return _("%(value)s is not an option; give each option at most one value.") % {"value": option[:60]}
        if option not in ALLOWED:
            return _("llama-server option %(option)s is not allowed in a profile.") % {"option": option[:60]}
        if option in KIND_OPTIONS:
            return _("%(option)s comes from the profile's kind and pooling: choose them there.") % {"option": option}
        if not chat and chat_only(option):
            return _("%(option)s is for chat profiles only.") % {"option": option}
        if known is not None and option not in known:
            return _("llama-server has no option %(option)s.") % {"option": option}
        problem = value_problem(option, value)
        if problem:
            return _("%(option)s %(problem)s.") % {"option": option, "problem": problem}
    return None


def kind_problems(profile: ServerProfile) -> dict[str, str]:
    """What an embeddings or reranking profile cannot have: chat's own settings, and poolings /v1/embeddings
    cannot answer with (one message per field)."""
    errors: dict[str, str] = {}
    if profile.kind not in ServerProfile.Kind.values:
        return {"kind": _("Choose chat, embeddings or reranking.")}
    only_chat = _("An embeddings or reranking profile cannot have this: it is for chat profiles only.")
    for field in ("draft_model_file", "mmproj_file", "chat_template", "chat_template_jinja"):
        if str(getattr(profile, field) or "").strip():
            errors[field] = only_chat
    if profile.reasoning == ServerProfile.Switch.ON:
        errors["reasoning"] = only_chat
    if profile.scan_reader == ServerProfile.ScanReader.MODEL:
        errors["scan_reader"] = only_chat
    if profile.is_default:
        errors["is_default"] = _("The default profile answers chats: it must be a chat profile.")
    if profile.kind == ServerProfile.Kind.EMBEDDING:
        if profile.pooling == ServerProfile.Pooling.RANK:
            errors["pooling"] = _("Rank pooling is a reranker's: choose the kind reranking instead.")
        elif profile.pooling == ServerProfile.Pooling.NONE:
            errors["pooling"] = _("/v1/embeddings needs one vector per text: choose mean, CLS or last token pooling.")
        elif profile.pooling not in ServerProfile.Pooling.values:
            errors["pooling"] = _("Choose one of llama-server's poolings: mean, CLS or last token.")
    return errors


def validate_profile(profile: ServerProfile, *, binary: str | None = None) -> None:
    """Raise ValidationError with a message per field; nothing is saved on error."""
    errors: dict[str, str] = {}
    for field, (low, high) in RANGES.items():
        value = getattr(profile, field)
        if value is None or not (low <= value <= high):
            errors[field] = _("Must be between %(low)s and %(high)s.") % {"low": low, "high": high}
    if profile.ubatch_size and profile.batch_size and profile.ubatch_size > profile.batch_size:
        errors["ubatch_size"] = _("The micro-batch cannot be larger than the batch.")
    if profile.draft_min > profile.draft_max:
        errors["draft_min"] = _("The minimum cannot be above the maximum.")
    layers = (profile.gpu_layers or "").strip().lower()
    if layers not in ("auto", "all") and not (layers.isdigit() and int(layers) <= 10_000):
        errors["gpu_layers"] = _("GPU layers is a number, auto or all.")
    for field in ("cache_type_k", "cache_type_v"):
        if getattr(profile, field) not in CACHE_TYPE_BYTES:
            errors[field] = _("Unknown cache type; llama-server accepts %(types)s.") % {
                "types": ", ".join(CACHE_TYPE_BYTES)
            }
    if profile.chat_template and profile.chat_template not in BUILTIN_TEMPLATES:
        errors["chat_template"] = _("llama-server has no built-in template named %(name)s.") % {
            "name": profile.chat_template
        }
    if profile.chat_template and profile.chat_template_jinja.strip():
        errors["chat_template_jinja"] = _("Give either a built-in template or a custom one, not both.")
    if not NAME_PATTERN.match(profile.name or ""):
        errors["name"] = _("Use letters, digits, dots, dashes and underscores (it becomes a model id).")
    if profile.scan_reader == ServerProfile.ScanReader.MODEL and not profile.mmproj_file:
        errors["scan_reader"] = _(
            "Only a profile with a vision projector can read scanned pages itself: choose one, or Tesseract."
        )
    if not profile.is_chat:
        errors.update(kind_problems(profile))
    if profile.is_remote:
        if profile.model_file:
            errors["model_file"] = _("A remote profile has no local model file.")
        elif problem := check_remote(profile.remote_url, profile.remote_api_key, profile.remote_model):
            errors["remote_url"] = problem
        if errors:
            raise ValidationError(errors)
        return
    if not profile.model_file:
        errors["model_file"] = _("Choose a model file, or give a remote llama-server URL.")
    main = _check_file(errors, "model_file", profile.model_file)
    draft = _check_file(errors, "draft_model_file", profile.draft_model_file)
    projector = _check_file(errors, "mmproj_file", profile.mmproj_file)
    if main and profile.n_cpu_moe and not main.is_moe:
        errors["n_cpu_moe"] = _("%(name)s is not a mixture-of-experts model.") % {"name": profile.model_file}
    if main and draft and (draft.vocab_size != main.vocab_size or draft.architecture.split("-")[0] == ""):
        errors["draft_model_file"] = _(
            "The draft model's vocabulary size (%(draft)d) does not match the model's (%(main)d)."
        ) % {"draft": draft.vocab_size, "main": main.vocab_size}
    if projector and projector.architecture != "clip":
        errors["mmproj_file"] = _("%(name)s is not a vision projector.") % {"name": profile.mmproj_file}
    try:
        extra = shlex.split(profile.extra_args or "")
    except ValueError as error:
        errors["extra_args"] = _("The extra arguments cannot be read: %(reason)s.") % {"reason": error}
        extra = []
    if any(token != token.strip() or any(mark in token for mark in UNSAFE_IN_VALUES) for token in extra):
        errors["extra_args"] = _("Extra arguments cannot contain ; # [ ] line breaks or edge spaces.")
    elif extra:
        try:
            known = known_options(binary or llama_server_binary()) or None
        except (FileNotFoundError, OSError, subprocess.SubprocessError):
            known = None
        if known is None:
            errors["extra_args"] = _(
                "llama-server cannot be asked for its options right now, so extra arguments cannot be checked."
            )
        elif problem := extra_args_problem(profile.extra_args, known, chat=profile.is_chat):
            errors["extra_args"] = problem
    if errors:
        raise ValidationError(errors)
