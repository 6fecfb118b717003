"""What an answer that goes on after its server failed sends, and which nodes may take it
(chat/conversations/resume.py); what llama-server makes of it: tests/integration/test_answer_resume.py."""

from __future__ import annotations

from chat.conversations.resume import continuation, eligible_nodes, note_cut_streams
from chat.conversations.services import answer_tokens
from chat.usage.entries import cut_streams

PAYLOAD = {
    "messages": [{"role": "user", "content": "Why is the sky blue?"}],
    "max_tokens": 100,
    "temperature": 0.7,
    "top_p": 0.8,
    "seed": 1,
    "chat_template_kwargs": {"enable_thinking": True},
}


def test_the_answer_so_far_goes_as_the_assistants_prefill_with_the_same_sampling_and_its_own_seed():
    request = continuation(PAYLOAD, "Because air", "Light scatters.", seed=77)
    assert request["messages"] == [
        *PAYLOAD["messages"],
        {"role": "assistant", "content": "Because air", "reasoning_content": "Light scatters."},
    ]
    # Explicitly a continuation: llama-server then streams only the new text (its prefill alone echoes it).
    assert request["continue_final_message"] is True and request["add_generation_prompt"] is False
    assert (request["temperature"], request["top_p"], request["chat_template_kwargs"]) == (
        0.7,
        0.8,
        {"enable_thinking": True},
    )
    assert request["seed"] == 77
    assert PAYLOAD["messages"] == [
        {"role": "user", "content": "Why is the sky blue?"}
    ]  # the first request is untouched


def test_cut_inside_the_thinking_the_thought_so_far_goes_alone_and_cut_before_any_text_the_question_goes_again():
    inside = continuation(PAYLOAD, "", "Light sca", seed=5)
    assert inside["messages"][-1] == {"role": "assistant", "content": "", "reasoning_content": "Light sca"}
    again = continuation(PAYLOAD, "", "", seed=5)
    assert again["messages"] == PAYLOAD["messages"] and "continue_final_message" not in again


def test_only_nodes_with_the_same_model_file_may_take_an_answer_and_its_own_node_always():
    digests = {"a": "f00d", "b": "f00d", "c": "beef", "d": ""}
    may = eligible_nodes(digests, "a")
    assert [node for node in digests if may(node)] == ["a", "b"]  # c: another file, d: not known
    unknown = eligible_nodes(digests, "d")
    assert [node for node in digests if unknown(node)] == ["d"]  # its file not known: only itself, once back


def test_the_streams_cut_before_the_one_that_ended_count_with_it():
    """Two cuts: the question took 100 tokens; 30 were written when the first stream was cut, 50 at the
    second; the stream that ended was given the question and those 50 (90 of 150 from its cache)."""
    resumes = [{"node": "a", "written": 30}, {"node": "b", "written": 50}]
    note_cut_streams(resumes, {"prompt_tokens": 60, "cached_tokens": 90, "output_tokens": 30})
    assert [(n["cut_prompt"], n["cut_output"]) for n in resumes] == [(100, 30), (130, 20)]
    stats = {"prompt_tokens": 60, "cached_tokens": 90, "output_tokens": 30, "resumed": resumes}
    assert cut_streams(stats) == (230, 50)
    assert answer_tokens("", "", stats) == 60 + 90 + 30 + 230 + 50
    assert answer_tokens("", "", {"output_tokens": 3}) == 3  # not resumed: its own figures alone
    # A stream that ended without figures notes nothing: the answer's length is its estimate then.
    unnoted = [{"node": "a", "written": 30}]
    note_cut_streams(unnoted, {})
    assert "cut_prompt" not in unnoted[0] and cut_streams({"resumed": unnoted}) == (0, 0)
