import pytest

from monitor.llama.errors import LlamaRejected, LlamaStreamBroken
from monitor.llama.sse import AnswerWatch, SSEParser


def test_events_split_across_reads_are_joined():
    parser = SSEParser()
    assert parser.feed(b'data: {"a": 1}\n\ndata: {"b"') == ([{"a": 1}], False)
    assert parser.feed(b": 2}\n\n") == ([{"b": 2}], False)


def test_several_events_in_one_read_form_one_batch_and_done_ends_it():
    parser = SSEParser()
    chunks, finished = parser.feed(b'data: {"n": 1}\r\n\r\ndata: {"n": 2}\n\n: keep-alive\n\ndata: [DONE]\n\n')
    assert chunks == [{"n": 1}, {"n": 2}] and finished


def test_error_event_becomes_our_exception_with_its_message():
    parser = SSEParser()
    with pytest.raises(LlamaRejected, match="context size exceeded"):
        parser.feed(b'data: {"error": {"code": 400, "message": "context size exceeded"}}\n\n')


# A chunk as llama-server writes it for one token of a chat answer.
TOKEN = (
    b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":" the \\"x\\" \\u00e9"}}],'
    b'"created":1764512345,"id":"chatcmpl-abc","model":"chat-8k@1","system_fingerprint":"b1-abc",'
    b'"object":"chat.completion.chunk"}\n\n'
)


def test_a_token_chunk_is_the_whole_object_with_its_text_decoded():
    chunks, finished = SSEParser().feed(TOKEN)
    assert not finished and chunks[0]["choices"][0]["delta"] == {"content": ' the "x" é'}
    assert chunks[0]["id"] == "chatcmpl-abc"


def test_a_crlf_split_between_reads_still_ends_the_event():
    parser = SSEParser()
    assert parser.feed(b'data: {"n": 1}\r\n\r') == ([], False)
    assert parser.feed(b'\ndata: {"n": 2}\r\n\r\n') == ([{"n": 1}, {"n": 2}], False)


def test_an_event_of_several_data_lines_is_joined():
    assert SSEParser().feed(b'data: {"n":\ndata: 3}\n\n') == ([{"n": 3}], False)


@pytest.mark.parametrize("payload", [b"not json", b"[1, 2]", b'"error"', b"42", b'{"n": 1'])
def test_an_event_that_is_not_a_json_object_breaks_the_stream(payload):
    with pytest.raises(LlamaStreamBroken):
        SSEParser().feed(b"data: " + payload + b"\n\n")


def test_an_error_event_with_an_odd_shape_is_still_named():
    with pytest.raises(LlamaRejected, match="slot busy"):
        SSEParser().feed(b'data: {"error": "slot busy"}\n\n')
    with pytest.raises(LlamaRejected) as caught:
        SSEParser().feed(b'data: {"error": {"message": "' + b"x" * 5000 + b'"}}\n\n')
    assert len(str(caught.value)) == 500


def test_an_event_that_never_ends_breaks_the_stream_instead_of_growing():
    parser = SSEParser()
    parser.feed(b'data: {"content": "')
    with pytest.raises(LlamaStreamBroken):
        for _ in range(10):
            parser.feed(b"x" * (1024 * 1024))


def test_the_answer_watch_finds_the_first_answer_event_split_across_reads_and_never_raises():
    """What a relay passes on untouched is hostile: junk, error events and the role chunk start nothing."""
    watch = AnswerWatch()
    for data in (
        b"data: not json\n\n",
        b'data: {"error": {"message": "x"}}\n\n: keep-alive\n\n',
        b'data: {"choices":[{"delta":{"role":"assistant","content":null}}]}\n\n',
        b'data: {"prompt_progress":{"processed":5,"total":10}}\n\ndata: {"choices": [{"delta": {"cont',
    ):
        assert watch.feed(data) is False
    assert watch.feed(b'ent": "Hi"}}]}\n\n') is True
    assert watch.feed(b"anything at all") is True  # once begun, nothing more is looked at
