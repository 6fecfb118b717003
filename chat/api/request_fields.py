"""What an API request may contain, checked at the border (``parse_request``): a JSON object within
the size limit, an allowlist of fields per endpoint, the shape of ``messages`` (or ``prompt`` /
``input``), media only as inline data, and the output cap.

Anything not listed here is refused with a 400 naming the field, so a llama-server
parameter the gateway never reviewed (``id_slot``, ``n_probs``, ``lora``,
``timings_per_token``...) never reaches the server. The README's API section lists the
same fields.
"""

from __future__ import annotations

import re

import orjson
from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from chat.api.errors import ApiError

# The endpoints that generate text: they stream, take llama.cpp's sampling extras and an output cap.
GENERATING = {"chat/completions", "completions"}
# OpenAI parameters llama-server does not do (it fails on them with a bare server error).
REFUSED_PARAMETERS = ("best_of", "suffix")
# OpenAI's own fields of each endpoint that llama-server implements.
OPENAI_FIELDS = {
    "chat/completions": {
        "model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature",
        "top_p", "n", "stop", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
        "seed", "user", "tools", "tool_choice", "parallel_tool_calls", "response_format", "reasoning_effort",
    },
    "completions": {
        "model", "prompt", "stream", "stream_options", "max_tokens", "temperature", "top_p", "n", "stop",
        "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "seed", "user", "echo",
        "best_of", "suffix",  # refused with their own message below
    },
    "embeddings": {"model", "input", "encoding_format", "dimensions", "user"},
    # Jina's and Cohere's shape, which llama-server speaks and Dify and FastGPT send.
    "rerank": {"model", "query", "documents", "top_n", "return_documents", "user"},
}  # fmt: skip
# The short, documented set of llama.cpp extras a caller may send for generation.
LLAMA_EXTRAS = {
    "top_k", "min_p", "typical_p", "repeat_penalty", "repeat_last_n", "mirostat", "mirostat_tau", "mirostat_eta",
    "grammar", "json_schema", "cache_prompt", "reasoning_format", "chat_template_kwargs",
}  # fmt: skip
OUTPUT_CAPS = ("max_tokens", "max_completion_tokens")
ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
# Content part type → the keys of its object that carry the file, and whether raw base64 is its shape.
MEDIA_PARTS = {
    "image_url": {"url": False},
    "input_audio": {"data": True, "url": False},
    "input_video": {"data": True, "url": False},
    "video_url": {"data": True, "url": False},
}
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")


def _bad(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def parse_request(endpoint: str, raw: bytes) -> dict:
    """The request's body, parsed and checked; ApiError 400 naming what is wrong."""
    body = parse_body(raw)
    check_parameters(endpoint, body)
    return body


def parse_body(raw: bytes) -> dict:
    if len(raw) > settings.API_MAX_BODY_BYTES:
        raise _bad(
            _("The request is too large: the limit is %(mb)d MB.") % {"mb": settings.API_MAX_BODY_BYTES // 1_048_576},
            code="request_too_large",
        )
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise _bad(_("The request body is not valid JSON: %(why)s") % {"why": error}, code="invalid_json") from error
    if not isinstance(body, dict):
        raise _bad(_("The request body must be a JSON object."), code="invalid_json")
    return body


def check_parameters(endpoint: str, body: dict) -> None:
    """Refuse what the gateway does not pass on, naming the parameter: the allowlist, the body's shape and the
    output cap (sets ``max_tokens`` when absent)."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _bad(_("Name a model in 'model': GET /v1/models lists them."), "model")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _bad(_("'stream' must be true or false."), "stream")
    if stream and endpoint not in GENERATING:
        raise _bad(_("This endpoint does not stream."), "stream")
    if "n" in body and body["n"] != 1:
        raise _bad(
            _("Unsupported parameter '%(name)s': one answer per request; send several requests instead.")
            % {"name": "n"},
            "n",
        )
    for name in REFUSED_PARAMETERS:
        if name in body:
            raise _bad(_("Unsupported parameter '%(name)s'.") % {"name": name}, name)
    if body.get("echo"):
        raise _bad(_("Unsupported parameter '%(name)s'.") % {"name": "echo"}, "echo")
    check_fields(endpoint, body)
    check_top_logprobs(body)
    if endpoint == "chat/completions":
        check_messages(body.get("messages"))
    elif endpoint == "completions":
        check_inputs(body.get("prompt"), "prompt")
    elif endpoint == "embeddings":
        check_inputs(body.get("input"), "input")
        check_embedding_options(body)
    else:
        check_rerank(body)
    cap_output(endpoint, body)


def check_fields(endpoint: str, body: dict) -> None:
    """Refuse the first field that is not on the endpoint's allowlist, naming it."""
    allowed = OPENAI_FIELDS[endpoint] | (LLAMA_EXTRAS if endpoint in GENERATING else set())
    for name in body:
        if name not in allowed:
            raise _bad(
                _("Unsupported parameter '%(name)s': this API accepts the OpenAI fields and a few llama.cpp extras.")
                % {"name": str(name)[:60]},
                str(name)[:60],
                code="unsupported_parameter",
            )


def cap_output(endpoint: str, body: dict) -> None:
    """Refuse an output length over ``API_MAX_TOKENS`` (naming it); set the cap when none is given."""
    if endpoint not in GENERATING:
        return
    cap = settings.API_MAX_TOKENS
    given = [name for name in OUTPUT_CAPS if name in body and body[name] is not None]
    for name in given:
        value = body[name]
        if isinstance(value, bool) or not isinstance(value, int) or not (1 <= value <= cap):
            raise _bad(
                _("'%(name)s' must be a whole number from 1 to %(cap)d, this server's limit.")
                % {"name": name, "cap": cap},
                name,
                code="max_tokens_over_limit",
            )
    if not given:
        body["max_tokens"] = cap  # llama-server never generates without a bound


def check_top_logprobs(body: dict) -> None:
    """OpenAI's range (0 to 20): more would have llama-server sort that many candidates per token."""
    value = body.get("top_logprobs")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 20):
        raise _bad(_("'top_logprobs' must be a whole number from 0 to 20."), "top_logprobs")


def check_messages(messages) -> None:
    """``messages`` must be a non-empty list of objects with a known role and text or content parts."""
    if not isinstance(messages, list) or not messages:
        raise _bad(_("'messages' must be a non-empty list of messages."), "messages")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise _bad(_("Each message must be an object with a role and content."), where)
        if message.get("role") not in ROLES:
            raise _bad(
                _("%(where)s has no valid role; use one of %(roles)s.")
                % {"where": where, "roles": ", ".join(sorted(ROLES))},
                f"{where}.role",
            )
        content = message.get("content")
        if content is None and message["role"] in ("assistant", "function"):
            continue  # an assistant turn that only calls tools
        if isinstance(content, list):
            check_parts(content, f"{where}.content")
        elif not isinstance(content, str):
            raise _bad(_("%(where)s must be text or a list of content parts.") % {"where": where}, f"{where}.content")


def check_parts(parts: list, where: str) -> None:
    """Every part is text or a media part whose file is inline (a data: URL, or base64 where the type takes it)."""
    for index, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            continue
        if kind not in MEDIA_PARTS:
            raise _bad(
                _("%(where)s[%(index)d] is not a supported content part (text, %(media)s).")
                % {"where": where, "index": index, "media": ", ".join(MEDIA_PARTS)},
                where,
            )
        inner = part.get(kind)
        carried = [key for key in MEDIA_PARTS[kind] if isinstance(inner, dict) and key in inner]
        if not carried:
            raise _bad(_("%(kind)s must be an object holding the file inline.") % {"kind": kind}, kind)
        for key in carried:
            value = inner[key]
            inline = isinstance(value, str) and (
                value.startswith("data:") or (MEDIA_PARTS[kind][key] and BASE64.fullmatch(value) is not None)
            )
            if not inline:
                raise _bad(
                    _(
                        "Unsupported %(kind)s URL: send the file inline as a data: URL (base64); the server does not fetch addresses."
                    )
                    % {"kind": kind},
                    kind,
                )


def check_inputs(items, name: str) -> None:
    """``prompt`` / ``input``: text, token ids, or objects whose only field is ``content`` parts."""
    if items is None:
        raise _bad(_("'%(name)s' is required.") % {"name": name}, name)
    if isinstance(items, str):
        return
    if not isinstance(items, list) or not items:
        raise _bad(_("'%(name)s' must be text or a non-empty list.") % {"name": name}, name)
    for item in items:
        if isinstance(item, dict):
            if set(item) != {"content"} or not isinstance(item["content"], list):
                raise _bad(_("Objects in '%(name)s' may only hold 'content' parts.") % {"name": name}, name)
            check_parts(item["content"], name)
        elif isinstance(item, list):
            if not all(isinstance(token, int) and not isinstance(token, bool) for token in item):
                raise _bad(_("'%(name)s' token lists must hold whole numbers.") % {"name": name}, name)
        elif isinstance(item, bool) or not isinstance(item, (str, int)):
            raise _bad(_("'%(name)s' must be text or token ids.") % {"name": name}, name)


def check_embedding_options(body: dict) -> None:
    if body.get("encoding_format", "float") not in ("float", "base64"):
        raise _bad(_("'encoding_format' must be float or base64."), "encoding_format")
    if "dimensions" in body:  # llama-server answers a model's own size only
        raise _bad(
            _("Unsupported parameter '%(name)s': vectors come in the model's own size.") % {"name": "dimensions"},
            "dimensions",
        )


def check_rerank(body: dict) -> None:
    """A query, the documents to rank (text, or Cohere's ``{"text": ...}``; made text for llama-server), and
    ``top_n`` within them. ``return_documents`` is answered here (llama-server never returns them)."""
    if not isinstance(body.get("query"), str) or not body["query"].strip():
        raise _bad(_("'query' must be a non-empty text."), "query")
    documents = body.get("documents")
    if not isinstance(documents, list) or not documents:
        raise _bad(_("'documents' must be a non-empty list of texts."), "documents")
    limit = settings.API_RERANK_MAX_DOCUMENTS
    if len(documents) > limit:
        raise _bad(
            ngettext(
                "At most %(limit)d document can be ranked in one request.",
                "At most %(limit)d documents can be ranked in one request.",
                limit,
            )
            % {"limit": limit},
            "documents",
            code="too_many_documents",
        )
    texts = [item.get("text") if isinstance(item, dict) and set(item) == {"text"} else item for item in documents]
    if not all(isinstance(text, str) for text in texts):
        raise _bad(_("'documents' must be a non-empty list of texts."), "documents")
    body["documents"] = texts
    top_n = body.get("top_n", len(texts))
    if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
        raise _bad(_("'top_n' must be a whole number of 1 or more."), "top_n")
    if not isinstance(body.get("return_documents", False), bool):
        raise _bad(_("'return_documents' must be true or false."), "return_documents")
