"""monitor/llama/wire.py: llama-server's streamed answers read off the socket on a frame clock,
framed by llhttp (httptools).

Fake upstream, named as such: a few lines of asyncio that write HTTP/1.1 the way llama-server
does (chunked SSE) with the timing each test needs (tokens every few ms, a cut mid-frame), which
the real server cannot be made to keep, and the protocol edges it never produces (an informational
1xx answer, duplicate headers, broken chunk framing, an unsupported transfer coding). The real
server's streams go through this reader in every chat and API integration test, and over TLS in
tests/integration/test_llama_transport.py.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from monitor.llama.client import LlamaClient
from monitor.llama.errors import LlamaRejected, LlamaStreamBroken, LlamaUnavailable
from scripts.local_services import free_port


def event(text: str) -> bytes:
    return b'data: {"choices":[{"delta":{"content":"%s"}}]}\n\n' % text.encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


async def serve(handler):
    """(client, server, requests seen): the fake upstream on a loopback port."""
    seen: list[bytes] = []

    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
        )
        seen.append(head + await reader.readexactly(length))
        try:
            await handler(writer)
        except ConnectionError:
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return LlamaClient(base_url=f"http://127.0.0.1:{port}", api_key="secret", timeout=5), server, seen


def texts(batches: list[list[dict]]) -> list[str]:
    return ["".join(c["choices"][0]["delta"]["content"] for c in batch) for batch in batches]


def run(handler, *, pace_s: float = 0.0, raw: bool = False):
    async def main():
        client, server, seen = await serve(handler)
        got = []
        try:
            if raw:
                async for data in client.stream_raw("/v1/chat/completions", {"messages": []}, pace_s=pace_s):
                    got.append((time.monotonic(), data))
            else:
                async for batch in client.stream_chat({"messages": []}, pace_s=pace_s):
                    got.append((time.monotonic(), batch))
        finally:
            server.close()
        return got, seen

    return asyncio.run(main())


async def first_token_alone(writer) -> None:
    """The head, read on its own, then the first token: a read of its own, which starts the frame's clock."""
    writer.write(HEAD)
    await writer.drain()
    await asyncio.sleep(0.02)
    writer.write(chunk(event("first")))
    await writer.drain()


def broken(handler, *, pace_s: float) -> tuple[list[tuple[float, bytes]], float]:
    """(the reads, with their times; when LlamaStreamBroken came) of a stream that must end broken."""

    async def main():
        client, server, _seen = await serve(handler)
        got = []
        try:
            with pytest.raises(LlamaStreamBroken):
                async for data in client.stream_raw("/v1/chat/completions", {"messages": []}, pace_s=pace_s):
                    got.append((time.monotonic(), data))
            return got, time.monotonic()
        finally:
            server.close()

    return asyncio.run(main())


def test_chunks_split_anywhere_come_out_whole_and_the_request_is_sent_as_llama_server_expects():
    body = b"".join(chunk(event(word)) for word in ("Hello", " there", "!")) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"

    async def dribble(writer):
        writer.write(HEAD)
        for index in range(0, len(body), 7):  # chunk framing cut at every place, CRLFs included
            writer.write(body[index : index + 7])
            await writer.drain()
            await asyncio.sleep(0.001)

    got, seen = run(dribble)
    assert "".join(texts([batch for _t, batch in got])) == "Hello there!"
    request = seen[0]
    assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"Authorization: Bearer secret\r\n" in request and b"Connection: close\r\n" in request
    assert request.endswith(b'{"messages":[],"stream":true}')


def test_tokens_within_one_frame_come_in_one_read_and_the_first_is_not_held():
    async def steady(writer):
        writer.write(HEAD)
        await writer.drain()
        await asyncio.sleep(0.05)
        started = time.monotonic()
        writer.write(chunk(event("first")))
        await writer.drain()
        for n in range(20):  # a token every 5 ms, against a 200 ms frame
            await asyncio.sleep(0.005)
            writer.write(chunk(event(f" {n}")))
            await writer.drain()
        writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()
        steady.first_sent = started

    got, _seen = run(steady, pace_s=0.2)
    batches = [batch for _t, batch in got]
    assert "".join(texts(batches)) == "first" + "".join(f" {n}" for n in range(20))
    assert texts(batches)[0] == "first"  # the first token alone, handed on as it came
    assert got[0][0] - steady.first_sent < 0.1  # not held for a frame
    # 21 tokens over 100-200 ms (a busy box's sleeps run long) in 200 ms frames, not one read each.
    assert len(batches) <= 4, texts(batches)


ANSWER_EVENTS = {
    "spaced-json": lambda n: b'data: {"choices": [{"delta": {"content": "%d "}}]}\n\n' % n,
    "reasoning": lambda n: b'data: {"choices":[{"delta":{"reasoning_content":"%d "}}]}\n\n' % n,
    "tool-call": lambda n: (
        b'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"%d"}}]}}]}\n\n' % n
    ),
    "completions": lambda n: b'data: {"choices":[{"text":"%d ","index":0}]}\n\n' % n,
}


@pytest.mark.parametrize("raw", [False, True], ids=["chat", "relayed"])
@pytest.mark.parametrize("shape", list(ANSWER_EVENTS))
def test_the_clock_starts_with_any_answer_event_however_it_is_written(shape, raw):
    """The role chunk starts no clock; the first event with answer text, reasoning or a tool call
    does, however its JSON is spaced: 21 tokens 5 ms apart come in a few reads, not 21."""
    make = ANSWER_EVENTS[shape]

    async def steady(writer):
        writer.write(HEAD + chunk(b'data: {"choices":[{"delta":{"role":"assistant","content":null}}]}\n\n'))
        await writer.drain()
        await asyncio.sleep(0.05)
        for n in range(21):
            if n == 0:
                steady.first_sent = time.monotonic()
            writer.write(chunk(make(n)))
            await writer.drain()
            await asyncio.sleep(0.005)
        writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()

    got, _seen = run(steady, pace_s=0.2, raw=raw)
    reads = [data for _at, data in got]
    if raw:
        assert b"".join(reads).count(b"data: ") == 23
    assert got[1][0] - steady.first_sent < 0.1  # the role chunk held nothing back
    assert len(reads) <= 5, reads  # the role chunk, the first token, then 200 ms frames


def test_without_a_pace_every_read_is_handed_on():
    async def steady(writer):
        writer.write(HEAD)
        for n in range(5):
            writer.write(chunk(event(str(n))))
            await writer.drain()
            await asyncio.sleep(0.02)
        writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    got, _seen = run(steady, pace_s=0)
    assert texts([batch for _t, batch in got]) == ["0", "1", "2", "3", "4"]


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

    got = []

    async def main():
        client, server, _seen = await serve(cut)
        try:
            async for batch in client.stream_chat({"messages": []}):
                got.append(batch)
        finally:
            server.close()

    with pytest.raises(LlamaStreamBroken):
        asyncio.run(main())
    assert texts(got) == ["kept"]


def test_an_informational_answer_and_duplicate_headers_come_before_the_answer():
    """A 1xx answer is passed over; a header given twice (Set-Cookie) is HTTP."""
    body = event("hi") + b"data: [DONE]\n\n"

    async def informational(writer):
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(
            b"HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        )

    got, _seen = run(informational)
    assert texts([batch for _t, batch in got]) == ["hi"]


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
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + event("all"))
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(b"data: [DONE]\n\n")

    got, _seen = run(until_close, raw=True)
    assert b"".join(data for _at, data in got) == event("all") + b"data: [DONE]\n\n"


def test_raw_bytes_are_relayed_untouched_and_leaving_early_closes_the_connection():
    async def endless(writer):
        writer.write(HEAD)
        try:
            for n in range(2000):
                writer.write(chunk(event(str(n))))
                await writer.drain()
                await asyncio.sleep(0.002)
        except ConnectionError:
            pass
        endless.stopped_at = n

    async def main():
        client, server, _seen = await serve(endless)
        first = b""
        try:
            async for data in client.stream_raw("/v1/chat/completions", {"messages": []}):
                first = data
                break
            await asyncio.sleep(0.3)
        finally:
            server.close()
        return first

    first = asyncio.run(main())
    assert first.startswith(event("0"))
    assert endless.stopped_at < 1000  # the fake saw the connection go and stopped writing


def test_prompt_progress_before_the_first_token_starts_no_clock():
    async def progress_then_token(writer):
        writer.write(HEAD)
        await writer.drain()
        await asyncio.sleep(0.02)  # the head read on its own, then the progress event
        writer.write(chunk(b'data: {"prompt_progress":{"processed":10,"total":10}}\n\n'))
        await writer.drain()
        await asyncio.sleep(0.01)
        progress_then_token.token_sent = time.monotonic()
        writer.write(chunk(event("first")))
        await writer.drain()
        await asyncio.sleep(0.6)  # the connection stays open: its close would end a frame's sleep
        writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    got, _seen = run(progress_then_token, pace_s=0.5, raw=True)
    token_at = next(at for at, data in got if b"first" in data)
    assert token_at - progress_then_token.token_sent < 0.25  # not held for the half-second frame


def test_the_answers_end_is_not_held_for_the_rest_of_a_frame():
    """The last tokens come within a frame of the one before; llama-server then closes the stream,
    and that close ends the frame's sleep: the end is handed on when it comes, not a frame later."""

    async def short_answer(writer):
        await first_token_alone(writer)
        await asyncio.sleep(0.02)
        short_answer.end_sent = time.monotonic()
        writer.write(chunk(event(" last")) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()

    got, _seen = run(short_answer, pace_s=3.0, raw=True)
    body = b"".join(data for _at, data in got)
    assert body == event("first") + event(" last") + b"data: [DONE]\n\n"
    last_at = next(at for at, data in got if b"[DONE]" in data)
    assert last_at - short_answer.end_sent < 1.5  # not held for the rest of the three-second frame


def test_tokens_during_a_frame_do_not_wake_the_reader_but_a_cut_does():
    """Many small writes inside one frame come out in one read; a stream closed mid-frame without its
    end (llama-server gone) is seen then."""

    async def cut(writer):
        await first_token_alone(writer)
        for n in range(10):
            await asyncio.sleep(0.01)
            writer.write(chunk(event(f" {n}")))
            await writer.drain()
        cut.cut_at = time.monotonic()
        writer.transport.abort()  # closed with no end marker: the last chunk and [DONE] never come

    got, broken_at = broken(cut, pace_s=3.0)
    assert [data for _at, data in got][0] == event("first")
    assert b"".join(data for _at, data in got) == event("first") + b"".join(event(f" {n}") for n in range(10))
    assert len(got) == 2  # the ten tokens of the frame in one read, when the cut woke it
    assert broken_at - cut.cut_at < 1.5  # not at the three-second frame's end


def test_a_reset_mid_frame_is_seen_at_once():
    """A connection reset (RST: llama-server killed) while a frame sleeps ends the stream as broken then."""
    import socket
    import struct

    async def reset(writer):
        await first_token_alone(writer)
        await asyncio.sleep(0.05)
        reset.reset_at = time.monotonic()
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with RST
        writer.transport.abort()

    got, broken_at = broken(reset, pace_s=3.0)
    assert [data for _at, data in got] == [event("first")]
    assert broken_at - reset.reset_at < 1.5  # not at the three-second frame's end


def test_a_stream_that_ends_while_its_reader_is_busy_does_not_keep_waking_the_loop(monkeypatch):
    """The socket stays watched between frames; when its end (or more than a frame's bytes) comes
    while the reader is busy handing on a read, it is no longer watched until the next frame, or
    the event loop would call the reader again at every turn until then."""
    from monitor.llama.connection import Connection

    calls = []
    on_readable = Connection._on_readable
    monkeypatch.setattr(Connection, "_on_readable", lambda self: (calls.append(1), on_readable(self)))
    tail = b"".join(chunk(event(f" {n:05d}" + "x" * 200)) for n in range(500))  # past the low-water mark

    async def late_end(writer):
        await first_token_alone(writer)
        await asyncio.sleep(0.02)
        writer.write(chunk(event(" second")))
        await writer.drain()
        await asyncio.sleep(0.1)  # the reader is busy with " second" now
        writer.write(tail + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()

    async def main():
        client, server, _seen = await serve(late_end)
        body = b""
        try:
            async for data in client.stream_raw("/v1/chat/completions", {"messages": []}, pace_s=0.05):
                body += data
                if b"second" in data:
                    await asyncio.sleep(0.4)  # a slow hand-off (a client that reads slowly)
        finally:
            server.close()
        return body

    body = asyncio.run(main())
    assert body.endswith(b"data: [DONE]\n\n") and b" 00499" in body
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
            return sock.getpeername()[1]
        finally:
            sock.close()
            listener.close()

    assert asyncio.run(main()) > 0


@pytest.mark.parametrize("length", [b"0", b"-5", b"x"])
def test_an_empty_or_impossible_content_length_answer(length):
    async def answer(writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %s\r\n\r\n" % length)
        await writer.drain()
        await asyncio.sleep(1)  # stays open: an empty body must not wait for the close

    async def main():
        client, server, _seen = await serve(answer)
        try:
            return [data async for data in client.stream_raw("/v1/chat/completions", {})]
        finally:
            server.close()

    if length == b"0":
        started = time.monotonic()
        assert asyncio.run(main()) == []
        assert time.monotonic() - started < 0.9
    else:
        with pytest.raises(LlamaUnavailable):
            asyncio.run(main())


def test_a_head_that_never_ends_is_refused_once_past_its_limit():
    """Headers past 64 KiB are not buffered on: refused then, not when the server gives up."""

    async def endless_head(writer):
        writer.write(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: %s\r\n" % (b"a" * 1000) * 100)
        await writer.drain()
        await asyncio.sleep(3)  # the head still open

    started = time.monotonic()
    with pytest.raises(LlamaUnavailable):
        run(endless_head)
    assert time.monotonic() - started < 2.5
