"""Faults under `make run`'s supervisord: each part killed for real, the time until chat answers again.

The whole product runs under the generated supervisord configuration (Redis, the
llama-server supervisor, Daphne, the worker, the watchdog's worker, beat, the sampler)
in a private folder. For each part in turn: SIGKILL its process, then time until
supervisord shows it running again under a new pid and a chat request through the
OpenAI-compatible API answers. ``llama-server`` kills the router the supervisor runs
(its own restart path); ``llama`` kills the supervisor process itself.

Prints ``restart_<part>_s=`` for each, ``restart_max_s=`` (the longest), and
``fault_lost_messages=``: conversation messages stored before the faults that are gone
or doubled afterwards (must be 0).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.local_services import redis_server_binary  # noqa: E402
from scripts.supervisor_config import supervisorctl, supervisord, write_config  # noqa: E402
from tests.support import stack  # noqa: E402

PARTS = ["web", "worker", "watchdog", "beat", "sampler", "redis", "llama-server", "llama"]
ANSWER_BODY = {"model": "chat-8k", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}


def program_pids(var_dir: Path) -> dict[str, int]:
    out = subprocess.run(supervisorctl(var_dir, "status"), stdout=subprocess.PIPE, text=True, check=False).stdout
    return {p[0]: int(p[3].rstrip(",")) for p in (line.split() for line in out.splitlines()) if p[1:2] == ["RUNNING"]}


def chat_answers(client: httpx.Client) -> bool:
    try:
        return client.post("/v1/chat/completions", json=ANSWER_BODY, timeout=10).status_code == 200
    except httpx.HTTPError:
        return False


def router_pid(var_dir: Path) -> int:
    from monitor.router.supervisor import read_pid, router_pid_path

    return read_pid(router_pid_path()) or 0


def stored_messages() -> list[tuple[int, str]]:
    from chat.models import Message

    return list(Message.objects.order_by("id").values_list("id", "content"))


def kill_and_time(part: str, var_dir: Path, client: httpx.Client) -> float:
    before = program_pids(var_dir)
    if part == "llama-server":
        old = router_pid(var_dir)
        os.kill(old, signal.SIGKILL)
        back = lambda: router_pid(var_dir) not in (0, old)  # noqa: E731
    else:
        old = before[part]
        os.kill(old, signal.SIGKILL)
        back = lambda: program_pids(var_dir).get(part, old) != old  # noqa: E731
    started = time.monotonic()
    stack.wait_until(back, 120, f"{part} restarted")
    stack.wait_until(lambda: chat_answers(client), 180, f"chat after {part}")
    return time.monotonic() - started


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-restart-bench-")
    env = dict(os.environ)
    port = env["REDIS_URL"].rsplit(":", 1)[1].split("/")[0]
    env.update(REDIS_SERVER_BIN=redis_server_binary(), QWENWEB_REDIS_PORT=port, QWENWEB_BIND="127.0.0.1")
    (run_dir / "redis").mkdir(exist_ok=True)
    write_config(env, with_redis=True, var_dir=run_dir)
    log = (run_dir / "supervisord.out").open("ab")
    process = subprocess.Popen(
        supervisord(run_dir), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
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
        kept = stored_messages()
        client = httpx.Client(base_url=base_url(), headers={"Authorization": f"Bearer {key}"})
        stack.wait_until(lambda: chat_answers(client), 300, "the stack under supervisord")
        times = {}
        for part in PARTS:
            times[part] = kill_and_time(part, run_dir, client)
            print(f"restart_{part.replace('-', '_')}_s={times[part]:.2f}", flush=True)
        after = stored_messages()
        lost = len(set(kept) - set(after)) + (len(after) - len(set(after)))
        print(f"restart_max_s={max(times.values()):.2f}")
        print(f"fault_lost_messages={lost}")
    finally:
        subprocess.run(supervisorctl(run_dir, "shutdown"), check=False, stdout=subprocess.DEVNULL)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
