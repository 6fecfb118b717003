"""The llama-server options a profile's extra arguments may set: a reviewed allowlist.

Each option is here because it only tunes how the model is run (sampling, batching,
offload, cache, context, rope/yarn, speculative decoding, templates, reasoning, threads,
NUMA, memory mode, LoRA and control vectors from the models folder) and with the kind of
value it takes, which is checked. An option must also be listed by the pinned binary's
``--help`` (``validation.known_options``). Everything else is refused by name: options that
listen, authenticate, serve files or a web UI, fetch from the internet (``-hf*``, ``*-url``,
``*-default``), write files (``--log-file``, ``--slot-save-path``, ``--log-prompts-dir``,
lookup caches), log prompts (``--verbose``), run programs (``--mcp-servers-*``, ``--agent``,
``--tools*``, ``--video-ffmpeg-dir``) or change what the router relies on (``--alias``,
``--models-*``, ``--props``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.utils.translation import gettext as _

from monitor.catalog.planner import CACHE_TYPE_BYTES


@dataclass(frozen=True)
class Flag:
    """An option that takes no value (or one of ``choices`` when given one, for ``[on|off]`` options)."""

    choices: tuple[str, ...] = ()

    def check(self, value: str | None) -> str | None:
        if value is None or value in self.choices:
            return None
        if self.choices:
            return _("takes one of %(choices)s") % {"choices": ", ".join(self.choices)}
        return _("takes no value")


@dataclass(frozen=True)
class Number:
    low: float
    high: float
    integer: bool = True

    def check(self, value: str | None) -> str | None:
        try:
            number = int(value) if self.integer else float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            number = None
        if number is None or not (self.low <= number <= self.high):
            kind = _("a whole number") if self.integer else _("a number")
            return _("takes %(kind)s from %(low)s to %(high)s") % {"kind": kind, "low": self.low, "high": self.high}
        return None


@dataclass(frozen=True)
class Choice:
    choices: tuple[str, ...]
    many: bool = False  # a comma-separated list of choices

    def check(self, value: str | None) -> str | None:
        parts = (value or "").split(",") if self.many else [value]
        if all(part in self.choices for part in parts):
            return None
        return _("takes one of %(choices)s") % {"choices": ", ".join(self.choices)}


@dataclass(frozen=True)
class Pattern:
    """A value of a known shape (tensor overrides, device lists, sampler orders...)."""

    regex: str
    shape: str

    def check(self, value: str | None) -> str | None:
        if value is not None and len(value) <= 500 and re.fullmatch(self.regex, value):
            return None
        return _("takes a value shaped like %(shape)s") % {"shape": self.shape}


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` resolves (symlinks followed, ``..`` removed) to a file inside ``folder``."""
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return False
    return resolved.is_file() and resolved.is_relative_to(folder.resolve())


def models_folder_file(name: str) -> bool:
    return bool(name) and inside(Path(settings.MODELS_DIR) / name, Path(settings.MODELS_DIR))


def template_folder() -> Path:
    return Path(settings.VAR_DIR) / "chat_templates"


@dataclass(frozen=True)
class ModelFiles:
    """Comma-separated files of the models folder, each optionally ``:SCALE`` when ``scaled``."""

    scaled: bool = False

    def check(self, value: str | None) -> str | None:
        for part in (value or "").split(","):
            name, _sep, scale = part.rpartition(":") if self.scaled else (part, "", "")
            if self.scaled and Number(-100, 100, integer=False).check(scale):
                return _("takes FILE:SCALE pairs with a number as the scale")
            if not models_folder_file(name):
                return _("takes files of the models folder (%(name)s is not one)") % {"name": name[:80]}
        return None

    def absolute(self, value: str) -> str:
        """The value with each file as its path in the models folder (llama-server runs elsewhere)."""
        parts = []
        for part in value.split(","):
            name, sep, scale = part.rpartition(":") if self.scaled else (part, "", "")
            parts.append(f"{(Path(settings.MODELS_DIR) / name).resolve()}{sep}{scale}")
        return ",".join(parts)


@dataclass(frozen=True)
class TemplateFile:
    """A template qwenweb wrote (``var/chat_templates/``) or one kept in the models folder."""

    def check(self, value: str | None) -> str | None:
        if value and (inside(template_folder() / value, template_folder()) or models_folder_file(value)):
            return None
        return _("takes a template file qwenweb wrote or one in the models folder")

    def absolute(self, value: str) -> str:
        own = template_folder() / value
        return str((own if inside(own, template_folder()) else Path(settings.MODELS_DIR) / value).resolve())


ON_OFF = ("on", "off", "auto")
COUNT = Number(0, 1_048_576)
SIGNED_COUNT = Number(-1, 1_048_576)
THREADS = Number(-1, 1024)
FRACTION = Number(0.0, 1.0, integer=False)
FACTOR = Number(-1_000_000.0, 1_000_000.0, integer=False)
CACHE_TYPES = Choice(tuple(CACHE_TYPE_BYTES))
DEVICES = Pattern(r"none|[A-Za-z0-9_]+(,[A-Za-z0-9_]+)*", "CUDA0,CUDA1")
TENSOR_OVERRIDE = Pattern(
    r"[A-Za-z0-9_.*+?|()\\^$-]+=[A-Za-z0-9_]+(,[A-Za-z0-9_.*+?|()\\^$-]+=[A-Za-z0-9_]+)*", "PATTERN=CPU"
)
CPU_MASK = Pattern(r"(0x)?[0-9A-Fa-f]{1,256}", "0xFF")
CPU_RANGE = Pattern(r"\d{1,4}-\d{1,4}", "0-7")
ZERO_ONE = Choice(("0", "1"))
TEXT = Pattern(r"[^\x00-\x1f\x7f]{1,200}", "STRING")
SPEC_TYPES = tuple(
    "none draft-simple draft-eagle3 draft-mtp draft-dflash draft-dspark ngram-simple ngram-map-k ngram-map-k4v"
    " ngram-mod ngram-cache".split()
)

# One row per option: every spelling llama-server accepts for it, and its value.
_REVIEWED: list[tuple[str, object]] = [
    # threads, CPU placement, NUMA, memory mode
    ("-t --threads -tb --threads-batch", THREADS),
    ("-C --cpu-mask -Cb --cpu-mask-batch", CPU_MASK),
    ("-Cr --cpu-range -Crb --cpu-range-batch", CPU_RANGE),
    ("--cpu-strict --cpu-strict-batch --poll-batch", ZERO_ONE),
    ("--poll", Number(0, 100)),
    ("--prio --prio-batch", Number(-1, 3)),
    ("--numa", Choice(("distribute", "isolate", "numactl"))),
    ("-lm --load-mode", Choice(("auto", "none", "mmap", "mlock", "mmap+mlock", "dio"))),
    ("-lzm --lazy-mode", Choice(ON_OFF)),
    # context, batching, cache
    ("-c --ctx-size --keep -b --batch-size -ub --ubatch-size --cache-reuse", COUNT),
    ("-n --predict --n-predict", SIGNED_COUNT),
    ("-np --parallel --kv-unified-per-slot -ctxcp --ctx-checkpoints --swa-checkpoints", SIGNED_COUNT),
    ("-cms --checkpoint-min-step -cram --cache-ram", SIGNED_COUNT),
    ("--swa-full --perf --no-perf --no-host --check-tensors --op-offload --no-op-offload", Flag()),
    ("-kvo --kv-offload -nkvo --no-kv-offload --repack -nr --no-repack", Flag()),
    ("-kvu --kv-unified -no-kvu --no-kv-unified --cache-idle-slots --no-cache-idle-slots", Flag()),
    ("--context-shift --no-context-shift --warmup --no-warmup -cb --cont-batching -nocb --no-cont-batching", Flag()),
    ("--cache-prompt --no-cache-prompt --swa-full -sp --special --ignore-eos -e --escape --no-escape", Flag()),
    ("-ctk --cache-type-k -ctv --cache-type-v", CACHE_TYPES),
    ("--spec-draft-type-k -ctkd --cache-type-k-draft --spec-draft-type-v -ctvd --cache-type-v-draft", CACHE_TYPES),
    ("-fa --flash-attn", Flag(ON_OFF)),
    ("-sps --slot-prompt-similarity", FRACTION),
    ("--sleep-idle-seconds -to --timeout --threads-http", SIGNED_COUNT),
    ("--sse-ping-interval", SIGNED_COUNT),
    # rope / yarn
    ("--rope-scaling", Choice(("none", "linear", "yarn"))),
    ("--rope-scale --rope-freq-base --rope-freq-scale", FACTOR),
    ("--yarn-ext-factor --yarn-attn-factor --yarn-beta-slow --yarn-beta-fast", FACTOR),
    ("--yarn-orig-ctx", COUNT),
    # offload
    ("-ngl --gpu-layers --n-gpu-layers", Pattern(r"auto|all|\d{1,5}", "auto|all|99")),
    ("-dev --device", DEVICES),
    ("-ot --override-tensor", TENSOR_OVERRIDE),
    ("-cmoe --cpu-moe", Flag()),
    ("-ncmoe --n-cpu-moe -ncffn --n-cpu-ffn", COUNT),
    ("-sm --split-mode", Choice(("none", "layer", "row", "tensor"))),
    ("-ts --tensor-split", Pattern(r"\d+(\.\d+)?(,\d+(\.\d+)?)*", "3,1")),
    ("-mg --main-gpu", Number(0, 64)),
    ("-fit --fit", Flag(("on", "off"))),
    ("-fitt --fit-target", Pattern(r"\d{1,7}(,\d{1,7})*", "1024,1024")),
    ("-fitc --fit-ctx", COUNT),
    ("--override-kv", Pattern(r"[A-Za-z0-9_.-]+=(int|float|bool|str):[A-Za-z0-9_.+-]{1,64}", "KEY=int:1")),
    # LoRA, control vectors, vision
    ("--lora --control-vector", ModelFiles()),
    ("--lora-scaled --control-vector-scaled", ModelFiles(scaled=True)),
    ("-mm --mmproj", ModelFiles()),
    ("--mmproj-auto --no-mmproj --no-mmproj-auto --mmproj-offload --no-mmproj-offload", Flag()),
    ("-mmdev --mmproj-device", DEVICES),
    ("--image-min-tokens --image-max-tokens --mtmd-batch-max-tokens", COUNT),
    ("--video-fps", Number(0.0, 120.0, integer=False)),
    ("--video-timestamp-interval", COUNT),
    # sampling
    ("-s --seed", Number(-1, 2**32 - 1)),
    ("--samplers --sampler-seq --sampling-seq", Pattern(r"[a-z_]+(,[a-z_]+)*|[a-z]+", "top_k,temperature")),
    ("--temp --temperature --dynatemp-range --dynatemp-exp", Number(0.0, 100.0, integer=False)),
    ("--top-k --repeat-last-n --dry-allowed-length --dry-penalty-last-n", SIGNED_COUNT),
    ("--top-p --min-p --xtc-probability --xtc-threshold --typical --typical-p", FRACTION),
    ("--top-nsigma --top-n-sigma --adaptive-target --adaptive-decay", Number(-1.0, 100.0, integer=False)),
    ("--repeat-penalty --presence-penalty --frequency-penalty --dry-multiplier --dry-base", FACTOR),
    ("--dry-sequence-breaker", TEXT),
    ("--mirostat", Number(0, 2)),
    ("--mirostat-lr --mirostat-ent", Number(0.0, 100.0, integer=False)),
    ("-l --logit-bias", Pattern(r"\d{1,7}[+-]\d+(\.\d+)?(,\d{1,7}[+-]\d+(\.\d+)?)*", "15043+1")),
    ("--grammar -j --json-schema", Pattern(r"[^\x00-\x1f\x7f]{1,4000}", "GRAMMAR")),
    ("-bs --backend-sampling", Flag()),
    ("-r --reverse-prompt", TEXT),
    # speculative decoding (draft model: a models-folder file)
    ("--spec-draft-model -md --model-draft", ModelFiles()),
    ("--spec-draft-threads -td --threads-draft --spec-draft-threads-batch -tbd --threads-batch-draft", THREADS),
    ("--spec-draft-cpu-mask -Cd --cpu-mask-draft --spec-draft-cpu-mask-batch -Cbd --cpu-mask-batch-draft", CPU_MASK),
    ("--spec-draft-cpu-range -Crd --cpu-range-draft", CPU_RANGE),
    ("--spec-draft-cpu-strict --cpu-strict-draft --spec-draft-cpu-strict-batch --cpu-strict-batch-draft", ZERO_ONE),
    ("--spec-draft-poll --poll-draft --spec-draft-poll-batch --poll-batch-draft", ZERO_ONE),
    ("--spec-draft-prio --prio-draft --spec-draft-prio-batch --prio-batch-draft", Number(-1, 3)),
    ("--spec-draft-override-tensor -otd --override-tensor-draft", TENSOR_OVERRIDE),
    ("--spec-draft-cpu-moe -cmoed --cpu-moe-draft", Flag()),
    ("--spec-draft-n-cpu-moe --spec-draft-ncmoe -ncmoed --n-cpu-moe-draft", COUNT),
    ("--spec-draft-n-max --spec-draft-n-min --spec-synth-len", COUNT),
    ("--spec-synth-rates", Pattern(r"\d+(\.\d+)?(,\d+(\.\d+)?)*", "0.9,0.8")),
    ("--spec-draft-p-split --draft-p-split --spec-draft-p-min --draft-p-min", FRACTION),
    ("--spec-draft-backend-sampling --no-spec-draft-backend-sampling", Flag()),
    ("--spec-draft-sampling", Choice(("greedy", "probabilistic"))),
    ("--spec-draft-device -devd --device-draft", DEVICES),
    ("--spec-draft-ngl -ngld --gpu-layers-draft --n-gpu-layers-draft", Pattern(r"auto|all|\d{1,5}", "auto|all|99")),
    ("--spec-type", Choice(SPEC_TYPES, many=True)),
    ("--spec-ngram-mod-n-min --spec-ngram-mod-n-max --spec-ngram-mod-n-match", COUNT),
    ("--spec-ngram-simple-size-n --spec-ngram-simple-size-m --spec-ngram-simple-min-hits", COUNT),
    ("--spec-ngram-map-k-size-n --spec-ngram-map-k-size-m --spec-ngram-map-k-min-hits", COUNT),
    ("--spec-ngram-map-k4v-size-n --spec-ngram-map-k4v-size-m --spec-ngram-map-k4v-min-hits", COUNT),
    # templates and reasoning
    ("--jinja --no-jinja --skip-chat-parsing --no-skip-chat-parsing", Flag()),
    ("--prefill-assistant --no-prefill-assistant --reasoning-preserve --no-reasoning-preserve", Flag()),
    ("--chat-template-file", TemplateFile()),
    ("--chat-template-kwargs", Pattern(r"\{[^\x00-\x1f\x7f]{0,1000}\}", '{"enable_thinking":false}')),
    ("--reasoning-format", Choice(("none", "deepseek", "deepseek-legacy", "auto"))),
    ("-rea --reasoning", Flag(ON_OFF)),
    ("--reasoning-effort", Pattern(r"[a-z]{1,20}", "low")),
    ("--reasoning-budget", SIGNED_COUNT),
    ("--reasoning-budget-message", TEXT),
    # embeddings and reranking
    ("--embedding --embeddings --rerank --reranking", Flag()),
    ("--pooling", Choice(("none", "mean", "cls", "last", "rank"))),
    ("--embd-normalize", Number(-1, 100)),
    # logging that stays on the console and writes no prompts
    ("--log-disable --log-jsonl --no-log-jsonl --log-prefix --no-log-prefix", Flag()),
    ("--log-timestamps --no-log-timestamps --offline", Flag()),
    ("--log-colors", Flag(ON_OFF)),
]

ALLOWED: dict[str, object] = {name: kind for names, kind in _REVIEWED for name in names.split()}

# Set by a profile's kind and pooling fields, never by hand: the kind is what the pages, the planner and
# the API read.
KIND_OPTIONS = frozenset("--embedding --embeddings --rerank --reranking --pooling".split())
# What only a chat profile can use: a draft model, a vision projector, chat templates, reasoning.
_CHAT_ONLY_PREFIXES = ("--spec-", "--draft-", "--mmproj", "--chat-template", "--reasoning", "--image-", "--video-")
_CHAT_ONLY_NAMES = frozenset(
    "-md --model-draft -mm -mmdev -rea --jinja --no-jinja --no-mmproj --no-mmproj-auto --prefill-assistant "
    "--no-prefill-assistant --skip-chat-parsing --no-skip-chat-parsing --mtmd-batch-max-tokens "
    "-td -tbd -Cd -Cbd -Crd -otd -cmoed -ncmoed -devd -ngld -ctkd -ctvd".split()
)


def chat_only(option: str) -> bool:
    """Whether an allowed option means something only to a chat profile (drafts, vision, templates, reasoning)."""
    return option in _CHAT_ONLY_NAMES or option.startswith(_CHAT_ONLY_PREFIXES) or option.endswith("-draft")


def value_problem(option: str, value: str | None) -> str | None:
    """Why ``value`` does not suit an allowed ``option`` (None when it does)."""
    return ALLOWED[option].check(value)  # type: ignore[attr-defined]


def absolute_value(option: str, value: str | None) -> str | None:
    """An allowed option's value as llama-server must get it: files as absolute paths, the rest unchanged."""
    kind = ALLOWED.get(option)
    if value is None or not hasattr(kind, "absolute"):
        return value
    return kind.absolute(value)  # type: ignore[union-attr]
