"""A small ``qwen35moe`` model for the real llama-server: the product's model family on a CPU.

Gated DeltaNet layers with full attention every 4th, routed and shared experts and an MTP
block, with Qwen3.5's own tokenizer and chat template from the pinned llama.cpp tree, so
llama-server's template engine, reasoning and tool-call parsers, speculative (MTP) loop and
image encoder run on this architecture as they do for Qwen3.6-35B-A3B.

The weights are zeros but for a wiring that makes the model a bigram machine: every block
adds nothing to the residual stream, so the logits depend on the last token alone (its
embedding through the output matrix). ``CHAIN`` names each wired token's successor; every
other context prefers end-of-turn. An answer starts after ``</think>\\n\\n`` with
``<tool_call>\\n``, which is how a tool call is made to happen where llama-server refuses a
``grammar`` beside tools: its own tool grammar then forces the rest of the call (a test tool's
argument is a constant in its schema; the built-ins' string argument is wired, ``(6*7)``); free
text goes on with a sentence (``SENTENCE``), and a thought (after ``<think>\\n``) is that sentence.
Elsewhere tests force text with a ``--grammar``. The MTP block projects the token's embedding
straight through, so its drafts are the same bigram: with MTP on, llama-server's draft acceptance is
a real figure of this wiring.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from tests.support.llama_tree import tree_file
from tests.support.profiles import live_id_here
from tests.support.synthetic_gguf import F32, Q8_0, Shape, encode, read_tokenizer, write_model
from tests.support.synthetic_mmproj import write_projector

TEMPLATE = "models/templates/Qwen3.5-4B.jinja"
VOCAB = "models/ggml-vocab-qwen35.gguf"
MODEL_FILE = "qwen35moe-tiny-Q8_0.gguf"
PROJECTOR_FILE = "mmproj-qwen35moe-tiny-F16.gguf"
N_EMBD = 128
# Token ids of the vocabulary below (llama-server's /tokenize of the same text).
END_OF_TURN = 151645  # <|im_end|>
AFTER_THINKING = 271  # "\n\n", the end of "<think>\n\n</think>\n\n": where an answer starts
TOOL_CALL, NEW_LINE, TOOL_CALL_END = 151657, 198, 151658
SENTENCE_TEXT = "The sky looks blue because air scatters short waves of sunlight."
SENTENCE = (785, 12884, 5868, 6303, 1576, 3720, 1136, 10175, 2805, 16876, 315, 39020, 13)
# An answer is "<tool_call>\n" then the sentence; "<think>\n" ends in the same new line, so a thought is the sentence.
CHAIN = {
    AFTER_THINKING: TOOL_CALL, TOOL_CALL: NEW_LINE, NEW_LINE: SENTENCE[0], TOOL_CALL_END: END_OF_TURN,
    **dict(zip(SENTENCE, SENTENCE[1:] + (END_OF_TURN,), strict=True)),
}  # fmt: skip
STEP, END = 26.0, 10.0  # logits: a wired successor, end-of-turn in any context; everything else 0
# A trained model writes a tool call in the tokens its tokenizer gives the call's text, so the template's
# rendering of the call in the next step's prompt is the same tokens and llama-server's prefix match runs
# past it. Under the tool grammar the wiring's ties would split it at random ("<fun" "c" "tion"): the
# calls are wired as their tokens instead, each a preferred successor of the one before; where the grammar
# allows several, the higher logit is the tokenizer's (4 apart: llama-server's min_p drops the rest).
# The ``nap`` call of bench/tool_bench.py, whose argument is a constant in its schema:
# "<function=nap>\n<parameter=n>\n1\n</parameter>\n</function>\n</tool_call>".
LESS_THAN, FUNCTION, EQUALS, NAP, TAG_END, PARAMETER, EQUALS_N, ONE, CLOSING = (
    27,
    1688,
    28,
    6861,
    397,
    16181,
    21747,
    16,
    522,
)
# The built-in tools (chat/tools/builtin.py), whose one argument is a string: the grammar lets a string
# run on until "\n</parameter>\n", so the wiring writes it whole, "(6*7)" for both, and where the grammar
# would also let the value go on ("\n</" "function", "\n</parameter" "=n") the closing tag's token is the
# higher. Outside a tool grammar nothing reaches these tokens (free text is the sentence); one that did
# would loop: ">\n" "(6*7)\n" "</parameter>\n" "(6*7)"… until max_tokens.
# "<function=calculator>\n<parameter=expression>\n(6*7)\n</parameter>\n</function>\n</tool_call>",
# "<function=search_documents>\n<parameter=query>\n(6*7)\n..." (search_documents when both are offered).
CALCULATOR, EXPRESSION, EQUALS_SEARCH, DOCUMENTS, EQUALS_QUERY = 88821, 28099, 96598, 75927, 79194
OPEN, SIX, TIMES, SEVEN, CLOSE_LINE = 7, 21, 9, 22, 340  # "(" "6" "*" "7" ")\n"
BUILTIN_ARGUMENT = "(6*7)"
CALL = {
    NEW_LINE: {LESS_THAN: 14.0, CLOSING: 18.0}, LESS_THAN: {FUNCTION: 14.0, PARAMETER: 14.0},
    FUNCTION: {EQUALS: 14.0, TAG_END: 14.0, EQUALS_SEARCH: 18.0}, EQUALS: {NAP: 14.0, CALCULATOR: 14.0, EXPRESSION: 14.0},
    NAP: {TAG_END: 14.0}, CALCULATOR: {TAG_END: 14.0}, EXPRESSION: {TAG_END: 14.0},
    EQUALS_SEARCH: {DOCUMENTS: 14.0}, DOCUMENTS: {TAG_END: 14.0}, EQUALS_QUERY: {TAG_END: 14.0},
    TAG_END: {LESS_THAN: 14.0, ONE: 14.0, CLOSING: 18.0, TOOL_CALL_END: 22.0, OPEN: 26.0},
    PARAMETER: {EQUALS: 10.0, EQUALS_N: 14.0, EQUALS_QUERY: 14.0, TAG_END: 18.0}, EQUALS_N: {TAG_END: 14.0},
    ONE: {NEW_LINE: 14.0}, CLOSING: {FUNCTION: 14.0, PARAMETER: 18.0},
    OPEN: {SIX: 14.0}, SIX: {TIMES: 14.0}, TIMES: {SEVEN: 14.0}, SEVEN: {CLOSE_LINE: 14.0}, CLOSE_LINE: {CLOSING: 18.0},
}  # fmt: skip
WIRED = sorted(set(CHAIN) | set(CALL))  # the tokens with a dimension of their own
BIAS_DIM = N_EMBD - 1  # the one dimension every embedding shares: end-of-turn's logit
# A tool the wiring calls: its one argument is a constant, so llama-server's grammar writes it whole.
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "object",
                    "properties": {"city": {"const": "Paris"}},
                    "required": ["city"],
                    "additionalProperties": False,
                }
            },
            "required": ["location"],
        },
    },
}


# The tree's Qwen3.5 test vocabulary leaves Qwen's added tokens as padding; the released models
# have them, and llama-server's reasoning budget and tool-call parser rely on <think> and
# <tool_call> being single tokens: they are put back where Qwen2.5/Qwen3 vocabularies keep them.
ADDED_TOKENS = {
    151646: ("<|object_ref_start|>", 3), 151647: ("<|object_ref_end|>", 3), 151648: ("<|box_start|>", 3),
    151649: ("<|box_end|>", 3), 151650: ("<|quad_start|>", 3), 151651: ("<|quad_end|>", 3),
    151652: ("<|vision_start|>", 3), 151653: ("<|vision_end|>", 3), 151654: ("<|vision_pad|>", 3),
    151655: ("<|image_pad|>", 3), 151656: ("<|video_pad|>", 3), 151657: ("<tool_call>", 4),
    151658: ("</tool_call>", 4), 151665: ("<tool_response>", 4), 151666: ("</tool_response>", 4),
    151667: ("<think>", 4), 151668: ("</think>", 4),
}  # fmt: skip


@functools.cache
def tokenizer() -> dict:
    found = read_tokenizer(tree_file(VOCAB))
    tokens, types = list(found["tokenizer.ggml.tokens"]), list(found["tokenizer.ggml.token_type"])
    for token, (text, kind) in ADDED_TOKENS.items():
        tokens[token], types[token] = text, kind
    return {**found, "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types}


def chat_template() -> str:
    return tree_file(TEMPLATE).decode("utf-8")


def _embeddings(n_vocab: int) -> np.ndarray:
    """Every row has RMS 1 (RMS norm leaves it as it is) and 8 on the bias dimension; a wired token
    has its own dimension besides, the others random values on the free dimensions."""
    free = N_EMBD - len(WIRED) - 1
    rows = np.random.default_rng(3).normal(0, 1, (n_vocab, N_EMBD)).astype(np.float32)
    rows[:, : len(WIRED)] = 0
    rows *= np.sqrt(64 / free) / np.sqrt((rows**2).sum(axis=1, keepdims=True) / free)
    for dim, token in enumerate(WIRED):
        rows[token] = 0
        rows[token, dim] = 8
    rows[:, BIAS_DIM] = 8
    return rows


def _output(n_vocab: int) -> np.ndarray:
    out = np.zeros((n_vocab, N_EMBD), np.float32)
    out[END_OF_TURN, BIAS_DIM] = END / 8
    for dim, token in enumerate(WIRED):
        if token in CHAIN:
            out[CHAIN[token], dim] += STEP / 8 if CHAIN[token] != END_OF_TURN else (STEP - END) / 8
        for successor, logit in CALL.get(token, {}).items():
            out[successor, dim] += logit / 8
    return out


def _wired_fill(name: str, dims: tuple[int, ...], kind) -> bytes | None:
    n_vocab = len(tokenizer()["tokenizer.ggml.tokens"])
    if name == "token_embd.weight":
        return encode(_embeddings(n_vocab), kind)
    if name == "output.weight":
        return encode(_output(n_vocab), kind)
    if name in ("output_norm.weight",) or name.endswith(("nextn.enorm.weight", "nextn.shared_head_norm.weight")):
        return encode(np.ones(dims), F32)
    if name.endswith("nextn.eh_proj.weight"):  # [2 n_embd -> n_embd]: the token's embedding half, unchanged
        return encode(np.eye(dims[1], dims[0], dtype=np.float32), kind)
    return None  # zeros: the block adds nothing


def shape(**changes) -> Shape:
    """4 trunk layers (3 DeltaNet, 1 attention) and one MTP block, 128 wide, 8 experts."""
    values = dict(
        n_layer=4, nextn=1, n_embd=N_EMBD, tokenizer=tokenizer(), chat_template=chat_template(), fill=_wired_fill,
        context_length=262144, weight_type=Q8_0, expert_type=Q8_0,
    )  # fmt: skip
    values.update(changes)
    return Shape("qwen35moe", **values)


def write_qwen35(folder: Path, name: str = MODEL_FILE, projector: bool = True) -> Path:
    """The model file in ``folder`` (with its vision projector beside it), written once."""
    path = Path(folder) / name
    if not path.exists():
        partial = path.with_name(path.name + ".part")
        write_model(partial, shape())
        partial.rename(path)
    if projector and not (Path(folder) / PROJECTOR_FILE).exists():
        partial = Path(folder) / (PROJECTOR_FILE + ".part")
        write_projector(partial, N_EMBD)
        partial.rename(Path(folder) / PROJECTOR_FILE)
    return path


# --- profiles of the product serving it ---------------------------------------------------------

# What a vision profile's model writes when nothing else constrains it (llama-server's --grammar, which
# a profile's extra arguments may not write with brackets): a thought of one to eight words, whichever
# the weights pick, then the answer.
ANSWER = "The lighthouse keeper wrote a report."
THOUGHT_WORDS = ("the ", "page ", "shows ", "a ", "tower ")
GRAMMAR = "root ::= (" + " | ".join(f'"{word}"' for word in THOUGHT_WORDS) + '){1,8} "\\n</think>\\n\\n' + ANSWER + '"'


@contextlib.contextmanager
def serving_profile(models_dir: Path, name: str, **fields) -> Iterator:
    """A saved profile of the wired model (and its projector); unloaded and deleted at the end, and the
    default profile loaded again (the router keeps one profile at a time, QWENWEB_MODELS_MAX)."""
    from asgiref.sync import async_to_sync

    from monitor.models import ServerProfile
    from monitor.profiles.loading import ensure_serving, unload_profile
    from monitor.profiles.selectors import find_profile
    from monitor.profiles.services import save_profile
    from monitor.profiles.validation import validate_profile

    write_qwen35(models_dir)
    profile = ServerProfile(
        name=name, model_file=MODEL_FILE, ctx_size=8192, parallel=2, threads=2, available_to_users=True, **fields
    )
    validate_profile(profile)
    save_profile(profile)
    try:
        async_to_sync(ensure_serving)(profile)
        yield profile
    finally:
        async_to_sync(unload_profile)(profile.name)
        ServerProfile.objects.filter(pk=profile.pk).delete()
        async_to_sync(ensure_serving)(find_profile(None))


def rendered_prompt(llama, profile, needle: str) -> str:
    """The prompt llama-server rendered with its template for the request containing ``needle``
    (its /slots shows it under LLAMA_SERVER_SLOTS_DEBUG, which the test stack sets)."""
    import httpx

    slots = httpx.get(llama.url + "/slots", params={"model": live_id_here(profile)}, headers=llama.headers, timeout=10)
    prompts = [slot.get("prompt") or "" for slot in slots.json()]
    found = [prompt for prompt in prompts if needle in prompt]
    assert found, f"no slot rendered a prompt with {needle!r}: {prompts}"
    return found[0]
