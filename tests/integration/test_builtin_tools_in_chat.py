"""The product's built-in tools (chat/tools/builtin.py) called by the model in a chat turn, with real parts:
a web process offering the product's own tools alone (tests/support/tool_web.py ``--product-tools``), the
real llama-server with the wired ``qwen35moe`` model and Qwen3.5's own template, whose tool grammar and
the model's wiring write the tool's string argument, ``(6*7)`` (tests/support/qwen35.py), and whose
tool-call parser reads it; the real WebSocket and fair queue. When both built-ins are offered (the
product's default) the wired model calls ``search_documents``; a web process offering the calculator
alone is how it calls that one.
"""

from __future__ import annotations

import json
import re

import pytest

from chat.knowledge.models import CollectionShare
from chat.models import Conversation
from tests.support.client import login, make_user
from tests.support.knowledge import own_document, words_collections
from tests.support.profiles import live_id_here
from tests.support.qwen35 import ANSWER, BUILTIN_ARGUMENT, rendered_prompt
from tests.support.tool_stack import tool_web_server, tools_profile
from tests.support.tool_turns import prompt_tokens_of_one_step_turn, shown_steps, slot_free, turn


@pytest.fixture(scope="module")
def profile(llama_server, redis_server):
    with tools_profile() as profile:
        yield profile


def _conversation(user, profile) -> Conversation:
    return Conversation.objects.create(
        owner=user, profile=profile, title="built-in tools", tools_enabled=True, thinking_enabled=False
    )


def _offered(prompt: str) -> list[str]:
    """The tools' names in the ``<tools>`` block Qwen3.5's template rendered."""
    block = prompt[prompt.index("<tools>") : prompt.index("</tools>")]
    return [json.loads(line)["function"]["name"] for line in block.splitlines()[1:] if line.strip()]


def test_the_model_calls_the_calculator_and_its_exact_result_goes_back(profile, llama_server, run_dir):
    with tool_web_server(run_dir, product_tools=True, QWENWEB_TOOL_BUILTINS="calculator", QWENWEB_TOOL_STEP_LIMIT="1"):
        user = make_user()
        http, conversation = login(user), _conversation(user, profile)
        events, message = turn(http, conversation, text="What is six times seven?")
        assert slot_free(llama_server, profile)
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    steps = shown_steps(events)
    assert [(s["name"], s["state"], s["result"]) for s in steps] == [("calculator", "done", "42")]
    assert json.loads(steps[0]["arguments"]) == {"expression": BUILTIN_ARGUMENT}
    # What llama-server rendered for the follow-up: the product's calculator offered alone, the call as the
    # model wrote it, the computed result after it.
    prompt = rendered_prompt(llama_server, profile, "<tool_response>\n42\n</tool_response>")
    assert _offered(prompt) == ["calculator"]
    assert f"<function=calculator>\n<parameter=expression>\n{BUILTIN_ARGUMENT}\n</parameter>" in prompt
    assert message.status == "complete" and message.content.endswith(ANSWER)
    assert [(s["name"], s["state"], s["result"]) for s in message.tool_steps] == [("calculator", "done", "42")]
    # The call was written in the tokenizer's own tokens: the follow-up took the whole first request and
    # the call from llama-server's cache.
    first_prompt, cached, followup_prompt = prompt_tokens_of_one_step_turn(events)
    assert first_prompt < cached < followup_prompt, events[-1]["stats"]


def test_the_model_searches_the_person_s_documents_and_readable_collections_in_two_steps(
    profile, llama_server, run_dir
):
    """Both built-ins offered, as the product does by default, and a limit of 2 steps: the model searches,
    reads the passages, searches again, then answers. Each result holds the person's own document and a
    collection shared with them, with where each passage comes from; another person's document and a
    collection not shared never reach the page, the stored steps or the model, though their words match.
    (The shared passage is one of the few in the session's database holding both words, and no reranker
    profile is left by other tests: the search's six best are the ones here.)"""
    reader, other = make_user(), make_user()
    suffix = reader.username[-8:]
    own_document(reader, f"shelf-{suffix}.txt", "Spare toner: shelf 6, row 7.")
    own_document(other, f"theirs-{suffix}.txt", "Their safe opens with 6 and 7.")
    limit_notice = "The model reached the limit of 2 tool calls in one answer, so it answered without more tools."
    with words_collections() as collection, tool_web_server(run_dir, product_tools=True, QWENWEB_TOOL_STEP_LIMIT="2"):
        shared = collection(other, f"shared-{suffix}", "Bay 6 holds 7 pallets.")
        CollectionShare.objects.create(collection=shared, user=reader)
        collection(other, f"private-{suffix}", "Cabinet 6 keeps 7 keys.")
        http, conversation = login(reader), _conversation(reader, profile)
        events, message = turn(http, conversation, text="Where is the spare toner?")
        page = http.get(f"/c/{conversation.id}/").text
        exported = http.get(f"/c/{conversation.id}/export.md").text
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    steps = shown_steps(events)
    assert [(s["name"], s["state"]) for s in steps] == [("search_documents", "done")] * 2
    assert all(json.loads(s["arguments"]) == {"query": BUILTIN_ARGUMENT} for s in steps)
    own_passage = f"[shelf-{suffix}.txt, p. 1]\nSpare toner: shelf 6, row 7."
    shared_passage = f"[shared-{suffix} / shared-{suffix}.txt, p. 1]\nBay 6 holds 7 pallets."
    for result in [s["result"] for s in steps] + [s["result"] for s in message.tool_steps]:
        assert own_passage in result and shared_passage in result, result
        assert f"theirs-{suffix}" not in result and f"private-{suffix}" not in result, result
    # The model read both results: the last request llama-server rendered holds both calls and both results.
    # (Each slot keeps the last prompt it read; the third request's is the one with both results.)
    prompts = [slot.get("prompt") or "" for slot in llama_server.slots(live_id_here(profile))]
    prompt = max(prompts, key=lambda text: text.count(f"<tool_response>\n{own_passage}"))
    assert _offered(prompt) == ["calculator", "search_documents"]
    calls = re.findall(r"<function=search_documents>\n<parameter=query>\n(.*?)\n</parameter>", prompt)
    results = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", prompt, re.S)
    assert calls == [BUILTIN_ARGUMENT] * 2 and len(results) == 2
    assert all(own_passage in result and shared_passage in result for result in results), results
    assert f"theirs-{suffix}" not in prompt and f"private-{suffix}" not in prompt
    assert message.status == "complete" and message.content.endswith(ANSWER) and message.error == limit_notice
    for text in (page, exported):  # the page carries the stored steps for its script to show
        assert f"shelf-{suffix}.txt" in text and f"shared-{suffix}.txt" in text
        assert f"theirs-{suffix}" not in text and f"private-{suffix}" not in text
