"""Our hand-written transport (``monitor/llama/``) against httpx streaming on the same frame clock.

One process, one real llama-server (tests/support/stack.py, as bench/api_bench.py starts it), the
same streamed chat request on every path (fixed seed, ``ignore_eos`` so every answer is
``QWENWEB_BENCH_TOKENS`` tokens, 256 by default, counted from the answer's ``usage``):

- API: ``LlamaClient.stream_raw`` (the gateway's path) with ``pace_s`` = ``API_FRAME_S``, against an
  ``httpx.AsyncClient`` (``client.stream`` + ``aiter_raw``) whose chunks are handed on at most once
  per frame once the answer's text has begun (``AnswerWatch``, the same mark ours starts its clock
  on), the frame's bytes gathered meanwhile, the rest handed on when the stream ends;
- chat: ``LlamaClient.stream_chat`` (a chat page's path) with ``CHAT_FRAME_S``, against the same
  httpx reader feeding each hand-off to the same ``SSEParser``;
- TLS: the API pair again through a TLS relay in a child process (tests/support/tls.py, a CA
  made for the run, trusted by both clients), so the relay's CPU is not this process's.

httpx cannot leave a frame's bytes in the kernel as ours does (its asyncio stream reads what comes
as it comes), so its reader wakes per network read and hands on per frame: the simple way to pace
it. Both send ``Connection: close`` (ours always does), so each request pays its own connection.
CPU is this process's (``time.process_time``) over each whole request; TTFT runs from the request
to the first hand-off carrying answer text. Rounds run every path in turn, every other round in
reverse order. Prints each round's figures, then medians with their spread (min-max), among them
``transport_httpx_cpu_ratio=`` (httpx's median CPU per 1k tokens over ours, API path).

``QWENWEB_BENCH_STAND_IN_TPS=62``: the same against a stand-in llama-server (a child process)
writing llama-server's events at that rate, for a box whose real one is too loaded to stream
faster than a frame (each token its own read, where no frame clock can gather anything).
``QWENWEB_BENCH_ROUNDS`` (3), ``QWENWEB_BENCH_TOKENS`` (256), ``QWENWEB_BENCH_TLS=0`` (no TLS pair).
"""

from __future__ import annotations

import asyncio
import os
import ssl
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace

import httpx
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

ROUNDS = int(os.environ.get("QWENWEB_BENCH_ROUNDS", "3"))
TOKENS = int(os.environ.get("QWENWEB_BENCH_TOKENS", "256"))
TLS = os.environ.get("QWENWEB_BENCH_TLS", "1") != "0"
PATH = "/v1/chat/completions"
QUESTION = {
    "messages": [{"role": "user", "content": "Write a long story about a lighthouse keeper and a storm."}],
    "seed": 7,
    "temperature": 0.7,
    "max_tokens": TOKENS,
    "ignore_eos": True,  # every answer as long as the next
    "stream_options": {"include_usage": True},
}
TAIL = 4096  # what a consumer keeps of a raw stream: enough for the usage event at its end


class Run:
    """One streamed answer's figures."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.cpu_started = time.process_time()
        self.first: float | None = None
        self.handoffs = 0
        self.tokens = 0

    def finish(self) -> tuple[float, float, int, int]:
        """(CPU s per 1000 tokens, TTFT ms, tokens, hand-offs)."""
        cpu = time.process_time() - self.cpu_started
        if not self.tokens or self.first is None:
            raise RuntimeError("the answer had no text or no usage")
        return cpu * 1000 / self.tokens, (self.first - self.started) * 1000, self.tokens, self.handoffs


def usage_tokens(tail: bytes) -> int:
    for line in tail.split(b"\n"):
        if line.startswith(b"data: {") and b'"usage"' in line:
            usage = orjson.loads(line[6:]).get("usage")
            if usage:
                return usage["completion_tokens"]
    return 0


async def read_raw(handoffs: AsyncIterator[bytes]) -> tuple[float, float, int, int]:
    """A relay's reading of a raw stream (the request is sent at the first step): its figures."""
    from monitor.llama.sse import AnswerWatch

    run, watch, tail = Run(), AnswerWatch(), b""
    async for data in handoffs:
        run.handoffs += 1
        if run.first is None and watch.feed(data):
            run.first = time.perf_counter()
        tail = (tail + data)[-TAIL:]
    run.tokens = usage_tokens(tail)
    return run.finish()


async def read_chat(batches: AsyncIterator[list[dict]]) -> tuple[float, float, int, int]:
    """A chat turn's reading of parsed batches (the request is sent at the first step): its figures."""
    from monitor.llama.sse import carries_answer

    run = Run()
    async for batch in batches:
        run.handoffs += 1
        if run.first is None and any(map(carries_answer, batch)):
            run.first = time.perf_counter()
        for chunk in batch:
            if chunk.get("usage"):
                run.tokens = chunk["usage"]["completion_tokens"]
    return run.finish()


async def paced(chunks: AsyncIterator[bytes], pace_s: float) -> AsyncIterator[bytes]:
    """httpx's chunks handed on as ours are: at once until the answer's text begins, then at most
    once per ``pace_s`` (a frame from the read that was handed on), the frame's bytes gathered."""
    from monitor.llama.sse import AnswerWatch

    loop = asyncio.get_running_loop()
    watch: AnswerWatch | None = AnswerWatch()
    due = 0.0
    pending = bytearray()
    async for data in chunks:
        pending += data
        now = loop.time()
        if watch is None and now < due:
            continue
        handed = bytes(pending)
        pending.clear()
        yield handed
        if watch is not None and watch.feed(handed):
            watch = None
        due = now + pace_s
    if pending:
        yield bytes(pending)


class HttpxPath:
    """The same request through one ``httpx.AsyncClient`` (as the product would keep one)."""

    def __init__(self, base_url: str, api_key: str, model: str, verify: ssl.SSLContext | bool = True):
        self.client = httpx.AsyncClient(base_url=base_url, timeout=600, verify=verify)
        self.headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json", "Connection": "close"}
        self.model = model

    async def handoffs(self, pace_s: float) -> AsyncIterator[bytes]:
        async with self.client.stream(
            "POST", PATH, content=orjson.dumps({**QUESTION, "model": self.model, "stream": True}), headers=self.headers
        ) as response:
            if response.status_code != 200:
                raise RuntimeError(f"llama-server said {response.status_code}: {(await response.aread())[:300]!r}")
            async for data in paced(response.aiter_raw(), pace_s):
                yield data

    async def batches(self, pace_s: float) -> AsyncIterator[list[dict]]:
        """Each hand-off through the SSE parser ``stream_chat`` uses, as ``stream_chat`` does."""
        from monitor.llama.sse import SSEParser

        parser = SSEParser()
        async for data in self.handoffs(pace_s):
            batch, finished = parser.feed(data)
            if batch:
                yield batch
            if finished:
                return


def start_tls_relay(target_url: str, run_dir: Path) -> tuple[subprocess.Popen, str, str]:
    """The TLS relay in a child process: (the process, its https:// URL, the CA file to trust)."""
    process = subprocess.Popen(
        [sys.executable, __file__, "tls-relay", target_url, str(run_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    url, ca_file = process.stdout.readline().split()
    return process, url, ca_file


def tls_relay_main(target_url: str, folder: str) -> None:
    from tests.support.tls import make_certificates, tls_relay

    certificates = make_certificates(Path(folder))
    with tls_relay(target_url, certificates) as url:
        print(url, certificates.ca, flush=True)
        sys.stdin.read()  # until the bench ends (its end closes the pipe) or kills this


def stand_in_event(delta: dict, **extra: object) -> bytes:
    """One event shaped as llama-server writes it (about its size), as an HTTP chunk of its own."""
    chunk = {
        "choices": [{"finish_reason": None, "index": 0, "delta": delta}],
        "created": 1764950000,
        "id": "chatcmpl-4cAL5SqIbVuBcnUjBl1fJZx1ZBpWaDmd",
        "model": "stand-in",
        "system_fingerprint": "b7200-5d7c2f6e1",
        "object": "chat.completion.chunk",
        **extra,
    }
    data = b"data: " + orjson.dumps(chunk) + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def stand_in_main(tokens_per_s: float) -> None:
    """A stand-in llama-server on a free port (printed): every request answered with TOKENS events
    at ``tokens_per_s``, then the usage and [DONE], as llama-server streams a chat answer."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line[15:]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n" + stand_in_event({"role": "assistant", "content": None})
        )
        loop = asyncio.get_running_loop()
        started = loop.time()
        for index in range(TOKENS):
            await asyncio.sleep(max(0.0, started + index / tokens_per_s - loop.time()))
            writer.write(stand_in_event({"content": " word"}))
        usage = {"completion_tokens": TOKENS, "prompt_tokens": 20, "total_tokens": TOKENS + 20}
        writer.write(stand_in_event({}, usage=usage) + b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
        await writer.drain()
        writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
        await loop.run_in_executor(None, sys.stdin.read)  # until the bench ends or kills this

    loop = asyncio.new_event_loop()
    loop.run_until_complete(serve())


def spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}"


def report(prefix: str, figures: dict[str, list[tuple[float, float, int, int]]]) -> None:
    """Medians and spreads of one pair (ours, httpx)."""
    cpu = {name: [run[0] for run in runs] for name, runs in figures.items()}
    ttft = {name: [run[1] for run in runs] for name, runs in figures.items()}
    ratios = [h / o for o, h in zip(cpu["ours"], cpu["httpx"], strict=True)]
    for name in ("ours", "httpx"):
        print(
            f"{prefix}_{name}_cpu_s_per_1k_tokens={statistics.median(cpu[name]):.3f} "
            f"{prefix}_{name}_cpu_spread={spread(cpu[name])} "
            f"{prefix}_{name}_ttft_ms={statistics.median(ttft[name]):.1f} "
            f"{prefix}_{name}_ttft_spread={spread(ttft[name])} "
            f"{prefix}_{name}_handoffs={statistics.median(run[3] for run in figures[name]):.0f}"
        )
    ratio = statistics.median(cpu["httpx"]) / statistics.median(cpu["ours"])
    print(f"{prefix}_httpx_cpu_ratio={ratio:.3f} {prefix}_httpx_cpu_ratio_spread={spread(ratios)} (per round)")


async def measure(llama, model: str, run_dir: Path) -> None:
    from django.conf import settings

    from monitor.llama.client import LlamaClient

    key = llama.env["LLAMA_API_KEY"]
    ours = LlamaClient(base_url=llama.url, api_key=key, model=model)
    plain = HttpxPath(llama.url, key, model)
    pairs: dict[str, dict[str, Callable]] = {
        "transport": {
            "ours": lambda: read_raw(ours.stream_raw(PATH, QUESTION, pace_s=settings.API_FRAME_S)),
            "httpx": lambda: read_raw(plain.handoffs(settings.API_FRAME_S)),
        },
        "transport_chat": {
            "ours": lambda: read_chat(ours.stream_chat(QUESTION, pace_s=settings.CHAT_FRAME_S)),
            "httpx": lambda: read_chat(plain.batches(settings.CHAT_FRAME_S)),
        },
    }
    relay = None
    if TLS:
        relay, https_url, ca_file = start_tls_relay(llama.url, run_dir)
        ours_tls = LlamaClient(base_url=https_url, api_key=key, model=model, ca_file=ca_file)
        tls = HttpxPath(https_url, key, model, verify=ssl.create_default_context(cafile=ca_file))
        pairs["transport_tls"] = {
            "ours": lambda: read_raw(ours_tls.stream_raw(PATH, QUESTION, pace_s=settings.API_FRAME_S)),
            "httpx": lambda: read_raw(tls.handoffs(settings.API_FRAME_S)),
        }
    try:
        print(
            f"api_frame_ms={settings.API_FRAME_S * 1000:.0f} chat_frame_ms={settings.CHAT_FRAME_S * 1000:.0f} tokens={TOKENS}"
        )
        paths = [(pair, name, stream) for pair, streams in pairs.items() for name, stream in streams.items()]
        QUESTION["max_tokens"] = 8  # a short warm-up: code paths, TLS contexts, the prompt cached
        for _pair, _name, stream in paths:
            await stream()
        QUESTION["max_tokens"] = TOKENS
        figures: dict[str, dict[str, list]] = {pair: {"ours": [], "httpx": []} for pair in pairs}
        for index in range(ROUNDS):
            line = []
            for pair, name, stream in paths if index % 2 == 0 else reversed(paths):
                result = await stream()
                figures[pair][name].append(result)
                line.append(
                    f"{pair}/{name} cpu={result[0]:.3f} ttft={result[1]:.0f}ms tokens={result[2]} handoffs={result[3]}"
                )
            print(f"round {index + 1}: " + " | ".join(sorted(line)), flush=True)
        for pair, results in figures.items():
            report(pair, results)
    finally:
        await plain.client.aclose()
        if relay is not None:
            await tls.client.aclose()
            relay.kill()
            relay.wait(10)


def main_stand_in(tokens_per_s: float) -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-transport-")
    process = subprocess.Popen(
        [sys.executable, __file__, "stand-in", str(tokens_per_s)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        upstream = SimpleNamespace(url=process.stdout.readline().decode().strip(), env={"LLAMA_API_KEY": "stand-in"})
        print(f"stand-in llama-server at {tokens_per_s:g} tokens/s")
        asyncio.run(measure(upstream, "stand-in", run_dir))
    finally:
        process.kill()
        process.wait(10)


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-transport-", parallel=1)
    services = [stack.start_redis(run_dir)]  # the llama supervisor's state lives in Redis
    llama = stack.start_llama(run_dir)
    services.append(llama)
    try:
        asyncio.run(measure(llama, llama.model_id, run_dir))  # the id read here: Django is sync
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["tls-relay"]:
        tls_relay_main(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["stand-in"]:
        stand_in_main(float(sys.argv[2]))
    elif os.environ.get("QWENWEB_BENCH_STAND_IN_TPS"):
        main_stand_in(float(os.environ["QWENWEB_BENCH_STAND_IN_TPS"]))
    else:
        main()
