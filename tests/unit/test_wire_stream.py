"""monitor/llama/wire.py: llama-server's streamed answers read off the socket on a frame clock,
framed by llhttp (httptools).

Fake upstream, named as such (tests/support/fake_upstream.py): a few lines of asyncio that write
HTTP/1.1 the way llama-server does (chunked SSE) in the order each test needs (a token once the one
before was handed on, tokens while a frame sleeps, a cut mid-frame), which the real server cannot
be made to keep, and the protocol edges it never produces (an informational 1xx answer, duplicate
headers, broken chunk framing, an unsupported transfer coding). The real server's streams go
through this reader in every chat and API integration test, and over TLS in
tests/integration/test_llama_transport.py.

Nothing here reads the clock: a frame is an hour (``FRAME_S``), so only the stream's own events
(its end, a cut, more than a frame's bytes) can end one within a test, and the fake writes what
comes next once the client handed on what came before. A reader that held what it should have
handed on never finishes: ``GUARD_S`` fails it. How long the frame clock holds things on a real
clock (the first token, a frame's batch, the end) is bench/pacing_bench.py's to print.
"""

from __future__ import annotations

import asyncio

import pytest

from monitor.llama.connection import Connection
from monitor.llama.errors import LlamaRejected, LlamaStreamBroken, LlamaUnavailable
from scripts.local_services import free_port
from tests.support.fake_upstream import HEAD, LAST_CHUNK, Handed, chunk, event, loop_turns, serve, write_apart

FRAME_S = 3600.0  # a frame no test outlives: its clock never ends one here
GUARD_S = 60  # every wait here ends on the fake's own writes: one this long means the reader held them


def texts(batches: list[list[dict]]) -> list[str]:
    return ["".join(c["choices"][0]["delta"]["content"] for c in batch) for batch in batches]


def run(handler, *, pace_s: float = 0.0, raw: bool = False, handed: Handed | None = None):
    """(what the client handed on: its batches, or its reads with ``raw``; the requests the fake saw)."""
    handed = handed or Handed()

    async def main():
        client, server, seen = await serve(handler)
        try:
            async with asyncio.timeout(GUARD_S):
                if raw:
                    async for data in client.stream_raw("/v1/chat/completions", {"messages": []}, pace_s=pace_s):
                        handed.add(data)
                else:
                    async for batch in client.stream_chat({"messages": []}, pace_s=pace_s):
                        handed.add(batch)
        finally:
            server.close()
        return handed.items, seen

    return asyncio.run(main())


def broken(handler, *, pace_s: float, handed: Handed) -> list[bytes]:
    """The reads of a stream that must end broken (LlamaStreamBroken)."""
    with pytest.raises(LlamaStreamBroken):
        run(handler, pace_s=pace_s, raw=True, handed=handed)
    return handed.items


def test_chunks_split_anywhere_come_out_whole_and_the_request_is_sent_as_llama_server_expects():
    body = b"".join(chunk(event(word)) for word in ("Hello", " there", "!")) + LAST_CHUNK

    async def dribble(writer):
        writer.write(HEAD)
        # chunk framing cut at every place, CRLFs included
        await write_apart(writer, [body[index : index + 7] for index in range(0, len(body), 7)])

    batches, seen = run(dribble)
    assert "".join(texts(batches)) == "Hello there!"
    request = seen[0]
    assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"Authorization: Bearer secret\r\n" in request and b"Connection: close\r\n" in request
    assert request.endswith(b'{"messages":[],"stream":true}')


def test_tokens_within_one_frame_come_in_one_read_and_the_first_is_not_held():
    """The first token is handed on as it comes: nothing more is written until it was. The twenty
    after it, written one by one with the loop let round between them, wake nothing while the frame
    sleeps; the stream's end does, and they come out in one read."""
    handed = Handed()

    async def steady(writer):
        writer.write(HEAD + chunk(event("first")))
        await handed.reach(1)  # not held for a frame
        await write_apart(writer, [chunk(event(f" {n}")) for n in range(20)])
        writer.write(LAST_CHUNK)

    batches, _seen = run(steady, pace_s=FRAME_S, handed=handed)
    assert texts(batches) == ["first", "".join(f" {n}" for n in range(20))]


ANSWER_EVENTS = {
    "spaced-json": lambda n: b'data: {"choices": [{"delta": {"content": "%d "}}]}\n\n' % n,
    "reasoning": lambda n: b'data: {"choices":[{"delta":{"reasoning_content":"%d "}}]}\n\n' % n,
    "tool-call": lambda n: (
        b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"%d"}}]}}]}\n\n' % n
    ),
    "completions": lambda n: b'data: {"choices":[{"text":"%d ","index":0}]}\n\n' % n,
}
ROLE = b'data: {"choices":[{"delta":{"role":"assistant","content":null}}]}\n\n'


@pytest.mark.parametrize("raw", [False, True], ids=["chat", "relayed"])
@pytest.mark.parametrize("shape", list(ANSWER_EVENTS))
def test_the_clock_starts_with_any_answer_event_however_it_is_written(shape, raw):
    """The role chunk starts no clock (the first answer event after it is handed on as it comes);
    the first event with answer text, reasoning or a tool call does, however its JSON is spaced:
    the twenty after it come in one read."""
    make = ANSWER_EVENTS[shape]
    handed = Handed()

    async def steady(writer):
        writer.write(HEAD + chunk(ROLE))
        await handed.reach(1)
        writer.write(chunk(make(0)))
        await handed.reach(2)  # the role chunk held nothing back
        await write_apart(writer, [chunk(make(n)) for n in range(1, 21)])
        writer.write(LAST_CHUNK)

    reads, _seen = run(steady, pace_s=FRAME_S, raw=raw, handed=handed)
    if raw:
        assert b"".join(reads).count(b"data: ") == 23
    assert len(reads) == 3, reads  # the role chunk, the first token, then the frame's twenty


def test_without_a_pace_every_read_is_handed_on(monkeypatch):
    """Each token is written once the one before was handed on (a reader that held a read for more
    would wait for good), and no frame ever sleeps."""
    frames = []
    pause = Connection.pause

    async def counted(self, wait_s):
        frames.append(wait_s)
        await pause(self, wait_s)

    monkeypatch.setattr(Connection, "pause", counted)
    handed = Handed()

    async def lockstep(writer):
        writer.write(HEAD)
        for n in range(5):
            writer.write(chunk(event(str(n))))
            await handed.reach(n + 1)
        writer.write(LAST_CHUNK)

    batches, _seen = run(lockstep, pace_s=0, handed=handed)
    assert texts(batches) == ["0", "1", "2", "3", "4"]
    assert frames == []


def test_an_error_status_is_the_servers_message():
    async def refuse(writer):
        body = b'{"error":{"code":400,"message":"the request exceeds the available context size","type":"x"}}'
        writer.write(
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        writer.write(body)

    with pytest.raises(LlamaRejected) as caught:
        run(refuse)
    assert caught.value.status == 400 and "context size" in str(caught.value.payload)


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b"", id="cut-between-chunks"),
        pytest.param(b"40\r\ndata: {", id="cut-mid-chunk"),
        pytest.param(b"zz\r\n", id="not-a-chunk-size"),
        pytest.param(b"5\r\nabcdeXX", id="chunk-without-its-crlf"),
    ],
)
def test_a_stream_cut_or_mangled_mid_answer_is_broken_after_what_came(tail):
    async def cut(writer):
        writer.write(HEAD + chunk(event("kept")) + tail)
        await writer.drain()

    handed = Handed()
    with pytest.raises(LlamaStreamBroken):
        run(cut, handed=handed)
    assert texts(handed.items) == ["kept"]


def test_an_informational_answer_and_duplicate_headers_come_before_the_answer():
    """A 1xx answer is passed over; a header given twice (Set-Cookie) is HTTP."""
    body = event("hi") + b"data: [DONE]\n\n"

    async def informational(writer):
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
        await writer.drain()
        await loop_turns()
        writer.write(
            b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )

    batches, _seen = run(informational)
    assert texts(batches) == ["hi"]


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(b"Content-Length: 5\r\nContent-Length: 7\r\n", id="two-lengths"),
        pytest.param(b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", id="a-length-and-chunks"),
        pytest.param(b"Transfer-Encoding: gzip, chunked\r\n", id="a-coding-not-read"),
        pytest.param(b"Transfer-Encoding: notchunked\r\n", id="chunked-only-as-a-substring"),
        pytest.param(b"Bad Header\r\n", id="a-line-that-is-no-header"),
    ],
)
def test_a_head_that_is_not_http_we_read_is_unavailable(head):
    async def odd(writer):
        writer.write(b"HTTP/1.1 200 OK\r\n" + head + b"\r\n" + chunk(event("x")))

    with pytest.raises(LlamaUnavailable):
        run(odd)


def test_a_body_read_until_the_close_ends_with_it():
    """An answer with neither a length nor chunks (HTTP/1.0's way) ends when the server closes."""

    async def until_close(writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        await write_apart(writer, [event("all"), b"data: [DONE]\n\n"])

    reads, _seen = run(until_close, raw=True)
    assert b"".join(reads) == event("all") + b"data: [DONE]\n\n"


def test_raw_bytes_are_relayed_untouched_and_leaving_early_closes_the_connection():
    """The client leaves after the first read: the fake, writing on, sees the connection go (a client
    that kept it open would leave the fake writing into full buffers, or to its answer's end)."""
    writes_failed = []
    finished = asyncio.Event()

    async def endless(writer):
        writer.write(HEAD)
        try:
            for n in range(2000):
                writer.write(chunk(event(str(n))))
                await writer.drain()
                await loop_turns(5)
        except ConnectionError:
            writes_failed.append(n)
        finally:
            finished.set()

    async def main():
        client, server, _seen = await serve(endless)
        first = b""
        try:
            async with asyncio.timeout(GUARD_S):
                async for data in client.stream_raw("/v1/chat/completions", {"messages": []}):
                    first = data
                    break
                await finished.wait()
        finally:
            server.close()
        return first

    first = asyncio.run(main())
    assert first.startswith(event("0"))
    assert writes_failed, "the fake wrote its whole answer: leaving early did not close the connection"


def test_prompt_progress_before_the_first_token_starts_no_clock():
    handed = Handed()

    async def progress_then_token(writer):
        writer.write(HEAD + chunk(b'data: {"prompt_progress":{"processed":10,"total":10}}\n\n'))
        await handed.reach(1)
        writer.write(chunk(event("first")))
        await handed.reach(2)  # handed on as it came: the progress held nothing back
        writer.write(LAST_CHUNK)

    reads, _seen = run(progress_then_token, pace_s=FRAME_S, raw=True, handed=handed)
    assert reads[1] == event("first")


def test_the_answers_end_is_not_held_for_the_rest_of_a_frame():
    """The last tokens come while a frame sleeps; llama-server then closes the stream, and that close
    ends the frame's sleep: the end is handed on when it comes, not when the frame ends."""
    handed = Handed()

    async def short_answer(writer):
        writer.write(HEAD + chunk(event("first")))
        await handed.reach(1)  # the frame sleeps from here
        writer.write(chunk(event(" last")) + LAST_CHUNK)  # then closed

    reads, _seen = run(short_answer, pace_s=FRAME_S, raw=True, handed=handed)
    assert reads == [event("first"), event(" last") + b"data: [DONE]\n\n"]


def test_tokens_during_a_frame_do_not_wake_the_reader_but_a_cut_does():
    """Many small writes inside one frame come out in one read; a stream closed mid-frame without its
    end (llama-server gone) is seen then."""
    handed = Handed()

    async def cut(writer):
        writer.write(HEAD + chunk(event("first")))
        await handed.reach(1)  # the frame sleeps from here
        await write_apart(writer, [chunk(event(f" {n}")) for n in range(10)])
        writer.transport.abort()  # closed with no end marker: the last chunk and [DONE] never come

    reads = broken(cut, pace_s=FRAME_S, handed=handed)
    assert reads == [event("first"), b"".join(event(f" {n}") for n in range(10))]


def test_a_reset_mid_frame_is_seen_at_once():
    """A connection reset (RST: llama-server killed) while a frame sleeps ends the stream as broken then."""
    import socket
    import struct

    handed = Handed()

    async def reset(writer):
        writer.write(HEAD + chunk(event("first")))
        await handed.reach(1)  # the frame sleeps from here
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
        writer.transport.abort()

    assert broken(reset, pace_s=FRAME_S, handed=handed) == [event("first")]


def test_a_stream_that_ends_while_its_reader_is_busy_does_not_keep_waking_the_loop(monkeypatch):
    """The socket stays watched between frames; when its end (or more than a frame's bytes) comes
    while the reader is busy handing on a read, it is no longer watched until the next frame, or
    the event loop would call the reader again at every turn until then."""
    calls = []
    on_readable = Connection._on_readable
    monkeypatch.setattr(Connection, "_on_readable", lambda self: (calls.append(1), on_readable(self)))
    # Each past the low-water mark: more than a frame's bytes, which wake a frame's sleep.
    more = b"".join(chunk(event(f" {n:05d}" + "x" * 200)) for n in range(400))
    tail = b"".join(chunk(event(f" {n:05d}" + "x" * 200)) for n in range(400, 800))
    handed = Handed()
    tail_sent = asyncio.Event()

    async def late_end(writer):
        writer.write(HEAD + chunk(event("first")))
        await handed.reach(1)  # the frame sleeps from here, the socket watched
        writer.write(more)  # wakes it
        await handed.reach(2)  # the client is busy handing that on (until tail_sent)
        writer.write(tail + LAST_CHUNK)
        tail_sent.set()
        await writer.drain()

    async def main():
        client, server, _seen = await serve(late_end)
        body = b""
        try:
            async with asyncio.timeout(GUARD_S):
                async for data in client.stream_raw("/v1/chat/completions", {"messages": []}, pace_s=FRAME_S):
                    body += data
                    handed.add(data)
                    if len(handed.items) == 2:  # a slow hand-off (a client that reads slowly)
                        await tail_sent.wait()
                        await loop_turns(200)
        finally:
            server.close()
        return body

    body = asyncio.run(main())
    assert body.endswith(b"data: [DONE]\n\n") and b" 00799" in body
    assert len(calls) < 20, len(calls)


def test_the_next_address_is_tried_when_the_first_refuses():
    """``localhost`` may name ::1 first while llama-server listens on 127.0.0.1 only."""
    from monitor.llama.connection import _connect

    async def main():
        listener = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        closed = free_port()  # nothing listens there
        sock = await _connect([(2, ("127.0.0.1", closed)), (2, ("127.0.0.1", port))])
        try:
            return sock.getpeername()[1], port
        finally:
            sock.close()
            listener.close()

    connected, listening = asyncio.run(main())
    assert connected == listening


def open_until_done(head: bytes):
    """The answer's head, then a connection held open until the client is done with it (a client that
    waited for its close would wait for good)."""
    done = asyncio.Event()

    async def answer(writer):
        writer.write(head)
        await writer.drain()
        await done.wait()

    async def main():
        client, server, _seen = await serve(answer)
        try:
            async with asyncio.timeout(GUARD_S):
                return [data async for data in client.stream_raw("/v1/chat/completions", {})]
        finally:
            done.set()
            server.close()

    return asyncio.run(main())


@pytest.mark.parametrize("length", [b"0", b"-5", b"x"])
def test_an_empty_or_impossible_content_length_answer(length):
    """An empty body ends with its head, not with the connection's close."""
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %s\r\n\r\n" % length
    if length == b"0":
        assert open_until_done(head) == []
    else:
        with pytest.raises(LlamaUnavailable):
            open_until_done(head)


def test_a_head_that_never_ends_is_refused_once_past_its_limit():
    """Headers past 64 KiB are not buffered on: refused then, not when the server gives up."""
    with pytest.raises(LlamaUnavailable):
        open_until_done(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: %s\r\n" % (b"a" * 1000) * 100)
