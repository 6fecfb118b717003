"""`make node`: run this box as an inference node of a main qwenweb box (docs/nodes.md).

Usage: python scripts/node.py [--main URL] [--token TOKEN] [--name NAME] [--llama-bind ADDR] [--llama-port PORT]
       (`make node MAIN=... TOKEN=... NAME=... LLAMA_BIND=... LLAMA_PORT=...` passes them in the environment
       as QWENWEB_JOIN_MAIN, QWENWEB_JOIN_TOKEN, QWENWEB_JOIN_NAME, QWENWEB_LLAMA_BIND, QWENWEB_LLAMA_PORT)

It sets up as `make run` does (llama-server, the default model, translations), gathers the node's facts
(GPUs, RAM, CPU cores, llama-server's build, its models with their SHA256), then joins the main box with
the token (the first start) or registers again with the credential saved in var/node.json (every later
start: no token). Then it runs the node's programs under supervisord, in the foreground: ``llama`` (its
router on LLAMA_BIND:LLAMA_PORT with the API key the main box gave it), ``worker`` (only this node's
queue), ``sampler``, and the event listener. Ctrl-C or `make stop` stops them. A refused join prints
the main box's reason and exits 1; a node removed on the main box's Nodes page stops and says so here.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from monitor.nodes import facts, membership  # noqa: E402
from monitor.telemetry.gpu import detect_gpus  # noqa: E402
from qwenweb.network import node_name_from_host  # noqa: E402
from scripts.local_services import free_port  # noqa: E402
from scripts.stack import clear_last_run, configured_var_dir, launch, prepare_common, step  # noqa: E402

DEFAULT_LLAMA_PORT = 8081
RETRY_S = 5.0
# What `make node` passes in the environment; none of it reaches the node's programs.
JOIN_VARIABLES = (
    "QWENWEB_JOIN_MAIN",
    "QWENWEB_JOIN_TOKEN",
    "QWENWEB_JOIN_NAME",
    "QWENWEB_LLAMA_BIND",
    "QWENWEB_LLAMA_PORT",
)


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run this box as an inference node of a main qwenweb box.")
    parser.add_argument("--main", default=os.environ.get("QWENWEB_JOIN_MAIN", ""), help="http://BOX:8000")
    parser.add_argument("--token", default=os.environ.get("QWENWEB_JOIN_TOKEN", ""), help="a join token")
    parser.add_argument("--name", default=os.environ.get("QWENWEB_JOIN_NAME", ""), help="default: the host's name")
    parser.add_argument("--llama-bind", default=os.environ.get("QWENWEB_LLAMA_BIND", ""))
    parser.add_argument("--llama-port", default=os.environ.get("QWENWEB_LLAMA_PORT", ""))
    return parser.parse_args(argv)


def address_toward(main: str) -> str:
    """This box's address on the way to the main box (what the main box reaches it at); no packet is sent."""
    parts = urlsplit(main)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((parts.hostname or "127.0.0.1", parts.port or 80))
        return probe.getsockname()[0]


def router_addresses(args: argparse.Namespace, main: str, saved: membership.Saved | None) -> tuple[str, str]:
    """(where the router listens, where the main box reaches it): LLAMA_BIND (this box's address toward
    the main box by default) and LLAMA_PORT (the saved one, else 8081 or a free port)."""
    old = urlsplit(saved.listen) if saved else None
    port = int(args.llama_port or (old.port if old else 0) or free_port(DEFAULT_LLAMA_PORT))
    bind = args.llama_bind or address_toward(main)
    reached = address_toward(main) if bind in ("0.0.0.0", "::") else bind
    host = f"[{reached}]" if ":" in reached else reached
    return f"http://{bind}:{port}", f"http://{host}:{port}"


def refused(main: str, error: membership.Refused) -> SystemExit:
    print(f"\nqwenweb: {main} refused this node: {error}\n", file=sys.stderr, flush=True)
    return SystemExit(1)


def register_when_main_answers(saved: membership.Saved, url: str, found: dict) -> dict:
    """A node that joined before waits for its main box (both boxes starting after a power cut)."""
    said = False
    while True:
        try:
            return membership.register(saved, url, found)
        except membership.Unreachable as error:
            if not said:
                print(f"    {error}; trying again every {RETRY_S:.0f} s (Ctrl-C stops)", flush=True)
                said = True
            time.sleep(RETRY_S)


def joined(args: argparse.Namespace, var_dir: Path, found: dict) -> membership.Saved:
    """Register again with the saved credential, or join with the token; what the node runs with."""
    saved = membership.load(var_dir)
    main = (args.main or (saved.main if saved else "")).rstrip("/")
    if not main:
        raise SystemExit(
            "The first start needs the main box and a join token: make node MAIN=http://BOX:8000 TOKEN=..."
        )
    listen, url = router_addresses(args, main, saved)
    if saved is not None and saved.main == main:
        step(f"registering with {main} as {saved.name}")
        try:
            answer = register_when_main_answers(saved, url, found)
        except membership.Refused as error:
            if not args.token:
                print(f"\nqwenweb: {membership.removed_message(main, str(error))}\n", file=sys.stderr, flush=True)
                raise SystemExit(1) from None
            print(f"    {error}\n    joining again with the token", flush=True)
        else:
            saved.update_addresses(answer)
            saved.listen, saved.url = listen, url
            membership.save(var_dir, saved)
            return saved
    if not args.token:
        raise SystemExit(f"Joining {main} needs a join token (its Nodes page): make node MAIN={main} TOKEN=...")
    name = args.name or (saved.name if saved else node_name_from_host())
    step(f"joining {main} as {name}")
    try:
        answer = membership.join(main, args.token, name, url, found)
    except membership.Refused as error:
        raise refused(main, error) from None
    except membership.Unreachable as error:
        raise SystemExit(f"qwenweb: {error}") from None
    saved = membership.Saved(
        main=main, name=answer["name"], credential=answer["credential"], llama_api_key=answer["llama_api_key"],
        listen=listen, url=url, redis=answer["redis"], database=answer["database"],
    )  # fmt: skip
    membership.save(var_dir, saved)
    print(f"    joined; what it needs to come back is in {membership.path_of(var_dir)} (mode 0600)", flush=True)
    return saved


def node_environment(env: dict, saved: membership.Saved) -> dict:
    """The node's programs' environment: its name, its router's address and key, its Redis user, the database."""
    database = saved.database
    if database["engine"] == "sqlite" and not Path(database["path"]).exists():
        raise SystemExit(
            f"The main box keeps its database in SQLite ({database['path']}), which this box cannot reach: "
            "move it to PostgreSQL before other boxes can join (docs/nodes.md)."
        )
    env = {key: value for key, value in env.items() if key not in JOIN_VARIABLES}
    env.update(
        QWENWEB_NODE_NAME=saved.name, LLAMA_SERVER_URL=saved.listen, LLAMA_API_KEY=saved.llama_api_key,
        REDIS_URL=saved.redis_url(), DATABASE_URL=saved.database_url(),
    )  # fmt: skip
    return env


def supervise(argv: list[str], env: dict, var_dir: Path) -> int:
    """supervisord in the foreground until it ends (Ctrl-C reaches it as well; SIGTERM is passed on)."""
    process = subprocess.Popen(argv, env=env, cwd=ROOT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: process.terminate())
    code = process.wait()
    removed = membership.removed_path(var_dir)
    if removed.exists():
        print(f"\nqwenweb: {removed.read_text().strip()}\n", file=sys.stderr, flush=True)
        return 1
    return code


def main(argv: list[str]) -> int:
    args = arguments(argv)
    var_dir = configured_var_dir()
    clear_last_run(var_dir)
    env = prepare_common()
    step("this node's facts")
    found = facts.gather(Path(env["QWENWEB_MODELS_DIR"]), env["LLAMA_SERVER_BIN"], var_dir, detect_gpus())
    print(f"    {facts.summary(found)}", flush=True)
    saved = joined(args, var_dir, found)
    env = node_environment(env, saved)
    membership.removed_path(var_dir).unlink(missing_ok=True)
    argv = launch(env, var_dir, with_redis=False, node=True)
    step(f"node {saved.name} of {saved.main}: llama-server at {saved.url}; logs in {var_dir / 'log'}")
    step("starting its parts under supervisord; Ctrl-C or `make stop` stops them")
    return supervise(argv, env, var_dir)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
