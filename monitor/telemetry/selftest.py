"""One-click self-test of a server profile: what a careful installer runs after set-up.

List the models, ask for a minimal answer, then measure prompt processing (a fixed
prompt, nothing from the cache) and generation (a fixed number of tokens), with
llama-server's own ``timings`` for the speeds and our clock for time to first token.
"""

from __future__ import annotations

import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils.translation import gettext as _

from monitor import timeline
from monitor.llama.client import LlamaClient
from monitor.llama.errors import LlamaError
from monitor.models import Event, SelfTestResult, ServerProfile
from monitor.nodes.registry import placement_here
from monitor.profiles.clients import profile_client
from monitor.profiles.selectors import find_profile

# Words of everyday English: about one token each for any modern tokenizer.
_WORDS = (
    "the box on the desk holds a small model that answers questions about maps rivers cities music "
    "gardens weather trains books tea and the history of bridges while people wait for the next page"
).split()


def prompt_text(tokens: int) -> str:
    return " ".join(_WORDS[i % len(_WORDS)] for i in range(tokens))


def settings_summary(profile: ServerProfile) -> str:
    if profile.is_remote:
        return f"remote {profile.remote_url} {profile.remote_model}".strip()
    return (
        f"{profile.model_file}, ctx {profile.ctx_size}, slots {profile.parallel}, ngl {profile.gpu_layers}, "
        f"threads {profile.threads}, batch {profile.batch_size}/{profile.ubatch_size}, "
        f"KV {profile.cache_type_k}/{profile.cache_type_v}, fa {profile.flash_attn}"
    )


class SelfTestFailed(Exception):
    """A step failed; the message names the step and is fit to show."""


async def measure(client: LlamaClient, *, prompt_tokens: int, generate_tokens: int) -> dict:
    """The self-test's steps against one client; raises SelfTestFailed naming the step."""
    figures: dict = {}
    step = _("listing models")
    try:
        listing = await client.get_json("/v1/models")
        figures["models_listed"] = [m.get("id", "") for m in listing.get("data") or []]
        if not figures["models_listed"]:
            raise SelfTestFailed(_("The server lists no model."))

        step = _("a minimal answer")
        answer = await client.post_json(
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 4, "temperature": 0},
        )
        if not answer.get("choices"):
            raise SelfTestFailed(_("The server answered without any choice."))

        step = _("prompt processing")
        processed = await client.post_json(
            "/v1/chat/completions",
            {
                "messages": [{"role": "user", "content": prompt_text(prompt_tokens)}],
                "max_tokens": 1,
                "cache_prompt": False,
                "temperature": 0,
            },
        )
        timings = processed.get("timings") or {}
        figures["prompt_tokens"] = timings.get("prompt_n")
        figures["prompt_tps"] = timings.get("prompt_per_second")

        step = _("generation")
        started = time.monotonic()
        first_token_at = None
        timings = {}
        payload = {
            "messages": [{"role": "user", "content": "Tell a short story about a lighthouse."}],
            "max_tokens": generate_tokens,
            "ignore_eos": True,  # always the same number of tokens, so runs compare
            "cache_prompt": False,
            "temperature": 0,
            "reasoning_effort": "none",
        }
        async for batch in client.stream_chat(payload):
            for chunk in batch:
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta") or {}
                    if first_token_at is None and (delta.get("content") or delta.get("reasoning_content")):
                        first_token_at = time.monotonic()
                if chunk.get("timings"):
                    timings = chunk["timings"]
        figures["generated_tokens"] = timings.get("predicted_n")
        figures["generation_tps"] = timings.get("predicted_per_second")
        if first_token_at is not None:
            figures["ttft_ms"] = round((first_token_at - started) * 1000, 1)
    except LlamaError as error:
        raise SelfTestFailed(_("%(step)s failed: %(error)s") % {"step": step, "error": error}) from error
    return figures


async def run_self_test(profile_name: str | None = None) -> SelfTestResult:
    """Run the self-test for a profile (the default when None); records a result and an event, never raises."""
    try:
        profile = await sync_to_async(find_profile)(profile_name)
    except LlamaError as error:
        return await sync_to_async(_save)(profile_name or "default", "", {}, str(error))
    client = profile_client(profile, await sync_to_async(placement_here)(profile))
    try:
        figures = await measure(
            client,
            prompt_tokens=settings.MONITOR_SELFTEST_PROMPT_TOKENS,
            generate_tokens=settings.MONITOR_SELFTEST_GENERATE_TOKENS,
        )
        error = ""
    except SelfTestFailed as failure:
        figures, error = {}, str(failure)
    return await sync_to_async(_save)(profile.name, settings_summary(profile), figures, error)


def _save(profile: str, summary: str, figures: dict, error: str) -> SelfTestResult:
    result = SelfTestResult.objects.create(
        profile=profile, ok=not error, error=error, settings_summary=summary[:400], **figures
    )
    if error:
        message = _("Self-test of %(profile)s failed: %(error)s") % {"profile": profile, "error": error}
    else:
        message = _(
            "Self-test of %(profile)s: prompt %(pp).1f tok/s, generation %(tg).1f tok/s, first token %(ttft).0f ms"
        ) % {
            "profile": profile,
            "pp": result.prompt_tps or 0,
            "tg": result.generation_tps or 0,
            "ttft": result.ttft_ms or 0,
        }
    level = Event.Level.ERROR if error else Event.Level.INFO
    timeline.record(Event.Kind.SELF_TEST, message, level=level, profile=profile, result=result.id)
    return result
