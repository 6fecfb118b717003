"""Faults under `make run`'s supervisord: each part killed for real, the time until chat answers again.

The whole product runs under the generated supervisord configuration (Redis, the
llama-server supervisor, Daphne, the worker, beat, the sampler)
in a private folder. For each part in turn, while a person's answer is streaming over
the chat socket: SIGKILL the part, send another question while it is down (where the
page can: not while the web server itself is), then time until supervisord shows the
part running again under a new pid and a chat request through the OpenAI-compatible
API answers. ``llama-server`` kills the router the supervisor runs (its own restart
path); ``llama`` kills the supervisor process itself.

Prints ``restart_<part>_s=`` for each, ``restart_max_s=`` (the longest),
``restart_redis_answer_kept=K/N`` (of N answers streaming while Redis is killed, a chat answer and an
API call, K complete and are stored once); the model instance frozen with SIGSTOP mid-answer, with the
default limits: ``hang_notice_s=`` (until the person is told the answer paused), ``hang_resume_s=``
(until it goes on, on the instance the heartbeat started again: issue 52) and ``hang_complete_s=``
(until that same answer is complete; before issue 52 it ended there, incomplete); and
``fault_lost_messages=``: messages stored before the faults that are gone or doubled
afterwards, plus messages the person sent during the faults (the streaming answers'
questions and those sent while a part was down) not stored exactly once with exactly
one answer, or left 'streaming' once everything is back (must be 0).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import httpx
from websockets.exceptions import ConnectionClosed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402
from tests.support.faults import Person, StreamedApiAnswer, lost_or_doubled, still_streaming  # noqa: E402
from tests.support.supervised import PARTS, Supervised, stored_messages, supervised_env  # noqa: E402

ANSWER_BODY = {"model": "chat-8k", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
LONG_ANSWER_TOKENS = 256


def chat_answers(client: httpx.Client) -> bool:
    try:
        return client.post("/v1/chat/completions", json=ANSWER_BODY, timeout=10).status_code == 200
    except httpx.HTTPError:
        return False


def ask_while_down(tab: Person, part: str) -> None:
    """A question sent from another tab while the part is down (not while the web server is: no page can)."""
    if part == "web":
        return
    try:
        tab.ask(f"Are you back? ({part})", 8)
    except ConnectionClosed:
        tab.sent.pop()  # never reached the server: the page shows it is reconnecting


def reconnected(person: Person) -> None:
    try:
        person.history()
    except ConnectionClosed:  # the web server (or its socket) went away: the page reconnects
        person.connect()


def kill_and_time(part: str, product: Supervised, client: httpx.Client, person: Person, tab: Person) -> float:
    person.start_long_answer(LONG_ANSWER_TOKENS)
    killed = product.kill(part)
    started = time.monotonic()
    ask_while_down(tab, part)
    stack.wait_until(lambda: product.pid_of(part) not in (0, killed), 120, f"{part} restarted")
    stack.wait_until(lambda: chat_answers(client), 180, f"chat after {part}")
    elapsed = time.monotonic() - started
    stack.wait_until(lambda: not still_streaming(product.var_dir), 180, f"answers settled after {part}")
    reconnected(person)
    reconnected(tab)
    return elapsed


def redis_answers_kept(product: Supervised, person: Person, key: str) -> tuple[int, int]:
    """A chat answer and an API answer streaming when Redis is killed: how many of them complete, stored once."""
    from tests.support.client import base_url

    answer = person.start_long_answer(LONG_ANSWER_TOKENS)
    body = {**ANSWER_BODY, "messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 256}
    call = StreamedApiAnswer(base_url(), key, body)
    call.first_bytes.wait(300)
    killed = product.kill("redis")
    stack.wait_until(lambda: product.pid_of("redis") not in (0, killed), 120, "redis restarted")
    done = person.until_done(answer, 600)
    call.finished.wait(600)
    stored = [row for row in person.stored(product.var_dir) if row[0] == answer]
    chat_kept = done["status"] == "complete" and len(stored) == 1 and stored[0][3] == "complete" and stored[0][2]
    return int(bool(chat_kept)) + int(call.complete), 2


def hang_times(product: Supervised, person: Person) -> tuple[float, float, float]:
    """Freeze the instance answering the person (SIGSTOP): seconds until they are told the answer paused,
    until it goes on (on the instance started again: one box), and until it is complete."""
    import signal

    import psutil

    answer = person.start_long_answer(LONG_ANSWER_TOKENS)
    router = psutil.Process(product.router_pid())
    instance = next(child for child in router.children() if "--alias" in child.cmdline())
    frozen = time.monotonic()
    os.kill(instance.pid, signal.SIGSTOP)
    seen: dict[str, float] = {}
    try:
        deadline = frozen + 300
        while True:
            event = person.event(max(1.0, deadline - time.monotonic()))
            if event.get("message") not in (None, answer):
                continue
            if event["type"] in ("notice", "resumed", "done"):
                seen.setdefault(event["type"], time.monotonic() - frozen)
            if event["type"] == "done":
                assert event["status"] == "complete" and event["stats"].get("resumed"), event
                return seen.get("notice", seen["done"]), seen.get("resumed", seen["done"]), seen["done"]
    finally:
        if psutil.pid_exists(instance.pid):
            os.kill(instance.pid, signal.SIGCONT)


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-restart-bench-")
    product = Supervised(run_dir, supervised_env(run_dir, os.environ, fresh_ports=False))
    product.start()
    try:
        from chat.api.keys import create_key
        from chat.models import Conversation, Message
        from tests.support.client import base_url, make_user

        user = make_user()
        _row, key = create_key(user, "bench")
        conversation = Conversation.objects.create(owner=user, title="kept through faults")
        for n in range(20):
            Message.objects.create(
                conversation=conversation, role="user" if n % 2 == 0 else "assistant", content=f"m{n}"
            )
        kept = stored_messages(run_dir)
        client = httpx.Client(base_url=base_url(), headers={"Authorization": f"Bearer {key}"})
        stack.wait_until(lambda: chat_answers(client), 300, "the stack under supervisord")
        person, tab = Person(user), Person(user)
        person.connect()
        tab.connect()
        tab.ask("A second tab.", 4)  # its conversation, before the faults
        times = {}
        for part in PARTS:
            times[part] = kill_and_time(part, product, client, person, tab)
            print(f"restart_{part.replace('-', '_')}_s={times[part]:.2f}", flush=True)
        kept_answers, streaming = redis_answers_kept(product, person, key)
        print(f"restart_redis_answer_kept={kept_answers}/{streaming}", flush=True)
        notice_s, resume_s, complete_s = hang_times(product, person)
        print(f"hang_notice_s={notice_s:.2f} hang_resume_s={resume_s:.2f} hang_complete_s={complete_s:.2f}", flush=True)
        after = {row[0]: row for row in stored_messages(run_dir)}
        lost = sum(1 for row in kept if after.get(row[0]) != row)
        lost += lost_or_doubled(person, run_dir) + lost_or_doubled(tab, run_dir) + len(still_streaming(run_dir))
        print(f"fault_messages_sent={len(person.sent) + len(tab.sent)}")
        print(f"restart_max_s={max(times.values()):.2f}")
        print(f"fault_lost_messages={lost}")
    finally:
        product.shutdown()


if __name__ == "__main__":
    main()
