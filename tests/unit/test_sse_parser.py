import pytest

from monitor.llama.errors import LlamaRejected
from monitor.llama.sse import SSEParser


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
