"""The tool loop's parts that need no service: the calculator's allowlist and bounds, the check of a
call's arguments against its tool's schema, a streamed call put together, approvals, what a step sends back."""

from __future__ import annotations

import asyncio

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from chat.tools.approvals import Approvals
from chat.tools.arguments import MAX_ARGUMENT_CHARS, BadArguments, parse_arguments
from chat.tools.base import ToolResult, ToolSpec
from chat.tools.builtin import CALCULATOR, BuiltinProvider, run_calculator
from chat.tools.calculator import CalculationError, calculate
from chat.tools.calls import ToolCalls
from chat.tools.loop import ToolLoop
from qwenweb.env import env_names


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("6*7", 42),
        ("(3 + 4) * 2 ** 10", 7168),
        ("-2 ** 2", -4),
        ("7 // 2 + 7 % 2", 4),
        ("1 / 4", 0.25),
        ("2.5e3", 2500.0),
    ],
)
def test_calculator_computes_arithmetic(expression, value):
    assert calculate(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",  # a call
        "open('/etc/passwd')",
        "(1).__class__",  # an attribute
        "x + 1",  # a name
        "[1, 2]",
        "'a' * 3",  # a string
        "lambda: 1",
        "1 if 1 else 2",
        "True + 1",  # bool is not a number here
        "2 ** 100000",  # exponent bound
        "(10 ** 999) ** 999",  # refused before it is computed
        "9 ** 999 * 9 ** 999 * 9 ** 999 * 9 ** 999",  # result size bound
        "1 / 0",
        "(-8) ** 0.5",  # not a real number
        "1e308 * 10",  # overflow to infinity
        "(" * 100 + "1" + ")" * 100,  # depth bound
        "1 + " * 100 + "1",  # length bound
        "",
    ],
)
def test_calculator_refuses_anything_but_bounded_arithmetic(expression):
    with pytest.raises(CalculationError):
        calculate(expression)


def test_calculator_tool_gives_errors_as_results():
    assert run_calculator({"expression": "6*7"}).text == "42"
    result = run_calculator({"expression": "__import__('os')"})
    assert result.is_error and "Only numbers" in result.text


def test_arguments_are_checked_against_the_schema():
    schema = CALCULATOR.parameters
    assert parse_arguments('{"expression": "1+1"}', schema) == {"expression": "1+1"}
    for text, where in [
        ("not json", "not valid JSON"),
        ("[1]", "must be a JSON object"),
        ("{}", "arguments.expression is required"),
        ('{"expression": 5}', "must be of type string"),
        ('{"expression": "1", "extra": 1}', "arguments.extra is not a known argument"),
        ("{" + " " * MAX_ARGUMENT_CHARS + "}", "longer than"),
    ]:
        with pytest.raises(BadArguments, match=where):
            parse_arguments(text, schema)
    nested = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 10},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
            "mode": {"const": "x"},
        },
    }
    assert parse_arguments('{"n": 3, "tags": ["a"], "mode": "x"}', nested)["n"] == 3
    for text, where in [
        ('{"n": 11}', "at most 10"),
        ('{"n": true}', "integer"),
        ('{"n": 1.5}', "integer"),
        ('{"tags": ["c"]}', r"tags\[0\] must be one of"),
        ('{"tags": ["a", "a", "b"]}', "at most 2 items"),
        ('{"mode": "y"}', "must be"),
    ]:
        with pytest.raises(BadArguments, match=where):
            parse_arguments(text, nested)


def test_streamed_tool_call_pieces_are_put_together_and_bounded():
    calls = ToolCalls()
    calls.feed([{"index": 0, "id": "call-1", "type": "function", "function": {"name": "calc", "arguments": ""}}])
    calls.feed([{"index": 0, "function": {"name": "ulator", "arguments": '{"expression":'}}])
    calls.feed([{"index": 0, "function": {"arguments": ' "6*7"}'}}])
    calls.feed(["junk", {"index": "x"}, None])  # hostile pieces are skipped
    call = calls.first()
    assert (call.id, call.name, call.arguments) == ("call-1", "calculator", '{"expression": "6*7"}')
    assert call.message_entry()["function"]["arguments"] == '{"expression": "6*7"}'
    huge = ToolCalls()
    for _ in range(10):
        huge.feed([{"index": 0, "function": {"name": "n" * 100, "arguments": "a" * MAX_ARGUMENT_CHARS}}])
    assert len(huge.first().name) == 64 and len(huge.first().arguments) == MAX_ARGUMENT_CHARS + 1
    assert huge.first().message_entry()["function"]["arguments"] == "{}"  # not JSON: goes back as {}
    assert ToolCalls().first() is None


def test_only_the_owner_decides_a_waiting_step_and_once():
    async def scenario():
        approvals = Approvals()
        with approvals.waiting("step-1", owner_id=1) as decision:
            assert not approvals.decide("step-1", 2, True)  # another person
            assert not approvals.decide("step-2", 1, True)  # no such step
            assert approvals.decide("step-1", 1, False)
            assert not approvals.decide("step-1", 1, True)  # decided already
            assert await decision is False
        assert approvals.pending() == 0 and not approvals.decide("step-1", 1, True)

    asyncio.run(scenario())


def test_only_the_builtins_staff_leave_on_are_offered(monkeypatch):
    with override_settings(CHAT_TOOL_BUILTINS=["calculator"]):
        assert [spec.name for spec in BuiltinProvider().tools_for(None, None)] == ["calculator"]
    with override_settings(CHAT_TOOL_BUILTINS=[]):
        assert BuiltinProvider().tools_for(None, None) == []
    monkeypatch.setenv("QWENWEB_TOOL_BUILTINS", "calculator, shell")
    with pytest.raises(ImproperlyConfigured, match="shell is not one of calculator, search_documents"):
        env_names("QWENWEB_TOOL_BUILTINS", "", ("calculator", "search_documents"))


class _Turn:
    """What the loop needs of a turn: each model step streams what ``steps`` says (a thought, a call,
    text) into the turn's lists as ``TurnRunner._answer`` does, and the requests are kept."""

    conversation = None
    assistant_id = 0

    def __init__(self, steps: list[dict]):
        self.steps, self.requests = steps, []
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls: ToolCalls | None = None

    async def _emit(self, event: dict) -> None:
        pass

    async def _answer(self, pool, payload: dict, started: float) -> dict:
        step = self.steps[len(self.requests)]
        self.requests.append(payload)
        self.reasoning.append(step.get("thought", ""))
        self.content.append(step.get("text", ""))
        if "call" in step:
            self.tool_calls.feed([{"index": 0, "id": "call-1", "function": step["call"]}])
        return {"prompt_tokens": 10, "cached_tokens": 5}


def test_each_step_goes_back_with_its_own_thought_and_text(monkeypatch):
    """The follow-up carries the step's thought (so the template renders the prefix llama-server has
    cached: tests/integration/test_tool_loop.py checks the rendering) and only that step's."""
    monkeypatch.setattr("chat.tools.loop.save_tool_steps", lambda *args: None)
    call = {"name": "calculator", "arguments": '{"expression": "6*7"}'}
    turn = _Turn(
        [
            {"thought": "Multiply.", "call": call},
            {"text": "Then ", "call": {"name": "calculator", "arguments": '{"expression": "42+1"}'}},
            {"thought": "Done.", "text": "43."},
        ]
    )
    with override_settings(CHAT_TOOL_STEP_LIMIT=5):
        stats = asyncio.run(ToolLoop(turn, None, None, [CALCULATOR]).run({"messages": []}, 0.0))
    assert stats["tool_steps"] == 2 and stats["prompt_tokens"] == 30
    said = [message for message in turn.requests[-1]["messages"] if message["role"] == "assistant"]
    assert [(m.get("reasoning_content"), m["content"]) for m in said] == [("Multiply.", ""), (None, "Then ")]
    results = [m["content"] for m in turn.requests[-1]["messages"] if m["role"] == "tool"]
    assert results == ["42", "43"]


def test_a_source_that_keeps_the_time_limit_itself_is_heard_before_the_loop_cuts_the_call(monkeypatch):
    """An MCP call ends at its limit with a message naming its server (tests/integration/test_mcp_servers.py):
    the loop waits a moment past the limit for it, and cuts only a source that keeps none."""
    monkeypatch.setattr("chat.tools.loop.save_tool_steps", lambda *args: None)
    spec = ToolSpec("wait", "Waits.", {"type": "object"}, False, "waits", timeout_s=0.05)

    class KeepsItsLimit:
        source = "waits"

        def tools_for(self, user, conversation):
            return [spec]

        async def call(self, spec, arguments, *, user, timeout):
            try:
                await asyncio.wait_for(asyncio.Event().wait(), timeout)
            except TimeoutError:
                return ToolResult(f"The tool server S did not answer within {timeout:g} s.", is_error=True)

    monkeypatch.setattr("chat.tools.providers.PROVIDERS", (KeepsItsLimit(),))
    turn = _Turn([{"call": {"name": "wait", "arguments": "{}"}}, {"text": "Done."}])
    with override_settings(CHAT_TOOL_STEP_LIMIT=5):
        asyncio.run(ToolLoop(turn, None, None, [spec]).run({"messages": []}, 0.0))
    results = [m["content"] for m in turn.requests[-1]["messages"] if m["role"] == "tool"]
    assert results == ["The tool server S did not answer within 0.05 s."]
