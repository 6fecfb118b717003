"""The product's model family through the real app and the real llama-server: a ``qwen35moe``
model (Gated DeltaNet, full attention every 4th layer, experts, an MTP block) with Qwen3.5's own
tokenizer and chat template and a vision projector (tests/support/qwen35.py), served by a profile
like any other. What the model writes is forced: by the profile's ``--grammar`` (a thought, then
``ANSWER``), by llama-server's own tool grammar, or by the model's wiring (tool calls, MTP drafts).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import shlex
from pathlib import Path

import openai
import pytest
from PIL import Image

from chat.api.keys import create_key
from chat.models import Conversation, Message
from monitor.telemetry.sampler import Sampler
from tests.support.client import base_url, chat_socket, events_until, login, make_user, send, text_of
from tests.support.qwen35 import (
    ANSWER,
    GRAMMAR,
    PROJECTOR_FILE,
    SENTENCE_TEXT,
    WEATHER_TOOL,
    rendered_prompt,
    serving_profile,
)  # fmt: skip

MODELS = Path(os.environ["QWENWEB_MODELS_DIR"])
pytestmark = pytest.mark.usefixtures("web_server")


@pytest.fixture(scope="module")
def vision(llama_server, web_server):
    with serving_profile(
        MODELS, "qwen35", mmproj_file=PROJECTOR_FILE, extra_args=f"--grammar {shlex.quote(GRAMMAR)}"
    ) as p:
        yield p


def _turn(http, conversation: Conversation, text: str, **extra) -> tuple[list[dict], Message]:
    with chat_socket(http) as ws:
        send(ws, type="send", conversation=str(conversation.id), text=text, **extra)
        accepted = events_until(ws, "accepted")[-1]
        events = events_until(ws)
    assert events[-1]["type"] == "done" and events[-1]["status"] == "complete", events[-3:]
    return events, Message.objects.get(id=accepted["assistant_message"]["id"])


def _settings(http, conversation: Conversation, **fields) -> None:
    token = http.cookies["csrftoken"]
    response = http.post(f"/c/{conversation.id}/settings/", data={"csrfmiddlewaretoken": token, **fields})
    assert response.status_code == 200, response.text[:300]


def test_thinking_streams_and_is_stored_apart_and_the_switch_reaches_the_template(vision, llama_server):
    user = make_user()
    http = login(user)
    conversation = Conversation.objects.create(owner=user, profile=vision)
    events, message = _turn(http, conversation, "What does the page say?")
    reasoning, answer = text_of(events, "reasoning"), text_of(events, "token")
    assert answer == ANSWER and reasoning.strip() and "</think>" not in reasoning + answer
    assert (message.reasoning, message.content) == (reasoning, answer)
    # Qwen3.5's own template, rendered by llama-server with the switch on: the answer opens a thought.
    assert rendered_prompt(llama_server, vision, "What does the page say?").endswith("<|im_start|>assistant\n<think>\n")

    _settings(http, conversation, thinking_budget="")
    _events, plain = _turn(http, conversation, "Without thinking?")
    prompt = rendered_prompt(llama_server, vision, "Without thinking?")
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # the switch off, in the template
    assert plain.reasoning == "" and plain.content.endswith(ANSWER)


def test_a_photo_is_scaled_to_512_pixels_and_encoded_by_llama_server(vision, llama_server):
    user = make_user()
    http = login(user)
    conversation = Conversation.objects.create(owner=user, profile=vision)
    out = io.BytesIO()
    Image.new("RGB", (2048, 1536), (40, 90, 200)).save(out, format="JPEG")
    image = "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode()
    _events, message = _turn(http, conversation, "What is in this photo?", image=image)
    stored = Message.objects.filter(conversation=conversation, role="user").latest("id")
    assert Image.open(io.BytesIO(bytes(stored.image))).size == (512, 384)
    # The projector turns each 32 x 32 pixels into a token: 16 x 12 = 192 of them (the photo as sent,
    # 2048 x 1536, would be 3072), beside some 20 tokens of text.
    assert 192 < message.stats["prompt_tokens"] < 192 + 60, message.stats
    assert "<|vision_start|>" in rendered_prompt(llama_server, vision, "What is in this photo?")
    assert message.content == ANSWER


def _api(user):
    row, key = create_key(user, "qwen35 agent")
    return row, openai.OpenAI(base_url=base_url() + "/v1", api_key=key, max_retries=0, timeout=120)


def test_tool_calls_are_parsed_by_llama_server_streamed_and_not_and_the_result_goes_back(vision):
    row, client = _api(make_user())
    question = [{"role": "user", "content": "What is the weather in Paris?"}]
    request = dict(
        model="qwen35", messages=question, tools=[WEATHER_TOOL], tool_choice="auto", parallel_tool_calls=False,
        max_tokens=120, extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )  # fmt: skip
    answer = client.chat.completions.create(**request)
    call = answer.choices[0].message.tool_calls[0]
    assert answer.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"location": {"city": "Paris"}}

    chunks = list(client.chat.completions.create(stream=True, **request))
    deltas = [delta for chunk in chunks if chunk.choices for delta in (chunk.choices[0].delta.tool_calls or [])]
    assert deltas[0].id and deltas[0].function.name == "get_weather"
    arguments = "".join(delta.function.arguments or "" for delta in deltas)
    assert json.loads(arguments) == {"location": {"city": "Paris"}}
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "tool_calls"

    follow_up = question + [
        {"role": "assistant", "content": "", "tool_calls": [call.model_dump(include={"id", "type", "function"})]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature_c": 21, "sky": "clear"}'},
    ]
    final = client.chat.completions.create(**{**request, "messages": follow_up, "tool_choice": "none"})
    assert final.choices[0].finish_reason == "stop" and final.choices[0].message.content.endswith(ANSWER)
    assert final.usage.prompt_tokens > answer.usage.prompt_tokens
    row.refresh_from_db()  # the key's use counted from llama-server's own figures, streamed or not
    assert row.requests == 3 and row.prompt_tokens >= 2 * answer.usage.prompt_tokens and row.completion_tokens > 0


def test_mtp_profile_answers_the_budget_cuts_a_thought_and_the_dashboard_shows_draft_acceptance(llama_server):
    """No grammar here: the model's wiring writes the sentence, and its MTP block drafts it."""
    with serving_profile(MODELS, "qwen35-mtp", extra_args="--spec-type draft-mtp --spec-draft-n-max 3") as mtp:
        user = make_user()
        http = login(user)
        conversation = Conversation.objects.create(owner=user, profile=mtp)
        _events, thought = _turn(http, conversation, "Why is the sky blue?")
        assert thought.reasoning == SENTENCE_TEXT
        _settings(http, conversation, thinking_budget="2", thinking="on")
        _events, budgeted = _turn(http, conversation, "In two words?")
        # llama-server closed the thought within its budget: the sentence's first words only.
        cut = budgeted.reasoning.strip()
        assert cut and SENTENCE_TEXT.startswith(cut) and len(cut.split()) <= 2, budgeted.reasoning
        _settings(http, conversation, thinking_budget="")
        _events, message = _turn(http, conversation, "And without thinking?")
        assert message.reasoning == "" and message.content.endswith(SENTENCE_TEXT)
        sample = _sample_until_drafted(mtp)
        assert sample["draft_tokens"] > 0 and 0 <= sample["draft_accept_pct"] <= 100
        assert sample["draft_accepted"] == round(sample["draft_tokens"] * sample["draft_accept_pct"] / 100)
        staff = login(make_user(is_staff=True))
        # The dashboard's script shows it, its label from the JavaScript catalogue.
        script = staff.get("/static/monitor/dashboard.js").text
        assert 'gettext("Draft acceptance (since start)")' in script and "s.draft_accept_pct" in script


def _sample_until_drafted(profile) -> dict:
    """The dashboard sampler's figures for ``profile``'s server, once it reads llama-server's draft counters."""

    async def main() -> dict:
        sampler = Sampler(source_timeout_s=5)
        servers: list = []
        for _attempt in range(50):
            servers = (await sampler.sample())["servers"]
            mine = [s for s in servers if s["profile"] == profile.name and s["ok"] and s.get("draft_tokens")]
            if mine:
                return mine[0]
            await asyncio.sleep(0.2)
        raise AssertionError(f"no draft figures for {profile.name}: {servers}")

    return asyncio.run(main())
