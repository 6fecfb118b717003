"""Set up and run the whole product under supervisord (see scripts/supervisor_config.py).

Usage: python scripts/stack.py run     (from `make run`: supervisord in the foreground, Ctrl-C stops all)
       python scripts/stack.py prepare (everything but starting the processes)
       python scripts/stack.py stop    (from `make stop`: asks a running supervisord to stop everything)

A run whose supervisord was killed leaves its programs running (each in a process group of its
own): `run` (and the boot service, which runs it) first stops whatever the last run left, and
`stop` stops it too when supervisord is gone; both say what they stopped (scripts/leftovers.py).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from monitor.llama.binary import without_amx_repack  # noqa: E402
from scripts.leftovers import (  # noqa: E402
    Leftover,
    describe,
    new_run,
    processes_of_run,
    recorded,
    running_supervisord,
    stop,
    wait_gone,
)
from scripts.local_services import (  # noqa: E402
    ensure_default_model,
    free_port,
    private_redis_url,
    redis_reachable,
    redis_server_binary,
    without_password,
    write_redis_acl,
)
from scripts.supervisor_config import STOP_WAIT_S, supervisorctl, supervisord, write_config  # noqa: E402

# `make stop`: how long supervisord may take to stop its programs (each up to STOP_WAIT_S) before
# what is left is stopped without it.
SHUTDOWN_WAIT_S = 60


def step(message: str) -> None:
    print(f"==> {message}", flush=True)


def manage(*args: str, env: dict) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], check=True, env=env, cwd=ROOT)


def llama_binary() -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_llama_server.py")], check=True, stdout=subprocess.PIPE, text=True
    )
    return result.stdout.strip().splitlines()[-1]


def prepare_common() -> dict:
    """What the main box and a node (`make node`, scripts/node.py) both need before they start: the
    environment of their programs, llama-server, the default model, the translations."""
    env = dict(os.environ)
    var_dir = Path(env.setdefault("QWENWEB_VAR_DIR", str(ROOT / "var"))).resolve()
    env["QWENWEB_VAR_DIR"] = str(var_dir)
    var_dir.mkdir(parents=True, exist_ok=True)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")
    env["PYTHONUNBUFFERED"] = "1"

    step("llama-server")
    env["LLAMA_SERVER_BIN"] = llama_binary()
    without_amx_repack(env)  # for every program (monitor.llama.binary says why)
    print(f"    {env['LLAMA_SERVER_BIN']}")

    step("default model (Gemma 3 270M Q4_K_M)")
    models_dir = Path(env.setdefault("QWENWEB_MODELS_DIR", str(var_dir / "models")))
    print(f"    {ensure_default_model(models_dir)} (SHA256 verified)")

    step("translations")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "compile_messages.py")], check=True)
    return env


def prepare() -> tuple[dict, bool]:
    env = prepare_common()
    var_dir = Path(env["QWENWEB_VAR_DIR"])

    with_redis = False
    step("Redis")
    if env.get("REDIS_URL") and redis_reachable(env["REDIS_URL"]):
        print(f"    using {without_password(env['REDIS_URL'])}")
    else:
        binary = redis_server_binary()
        if binary is None:
            raise SystemExit("No redis-server found: install Debian's redis-server or set REDIS_URL.")
        port = free_port(int(env.get("QWENWEB_REDIS_PORT", "6390")))
        (var_dir / "redis").mkdir(exist_ok=True)
        # The password (var/redis_password) reaches the box's programs in REDIS_URL, through supervisord's
        # environment: never on an argv, never in a file a browser or a log sees.
        env.update(REDIS_SERVER_BIN=binary, QWENWEB_REDIS_PORT=str(port), REDIS_URL=private_redis_url(var_dir, port))
        with_redis = True
        bind = env.get("QWENWEB_REDIS_BIND", "127.0.0.1")
        print(
            f"    private redis-server on {bind}:{port} (password in var/redis_password), data in {var_dir / 'redis'}"
        )

    env.setdefault("QWENWEB_BIND", "0.0.0.0")
    env["QWENWEB_PORT"] = env.get("QWENWEB_PORT", "8000")
    if "LLAMA_SERVER_URL" not in env:
        env["LLAMA_SERVER_URL"] = f"http://127.0.0.1:{free_port(int(env.get('QWENWEB_LLAMA_PORT', '8081')))}"

    step("database, this box's facts as a node")
    manage("migrate", "--noinput", "-v", "0", env=env)
    manage("register_node", env=env)
    password = secrets.token_urlsafe(12)
    created = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "ensure_admin", "--username", "admin"],
        check=True,
        env={**env, "QWENWEB_ADMIN_PASSWORD": password},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout.strip()
    if created == "created":
        print(
            f"\n    First run: admin account 'admin', password: {password}\n    (shown once; change it in the admin)\n"
        )
    return env, with_redis


def configured_var_dir() -> Path:
    return Path(os.environ.get("QWENWEB_VAR_DIR", str(ROOT / "var"))).resolve()


def stop_leftovers(var_dir: Path, why: str) -> tuple[list[Leftover], list[Leftover]]:
    """Stop every process of the recorded run that is still alive, saying which: (found, not stopped)."""
    leftovers = processes_of_run(var_dir)
    if not leftovers:
        return [], []
    step(why)
    for line in describe(leftovers):
        print(f"    {line}", flush=True)
    survivors = stop(leftovers, STOP_WAIT_S)
    if survivors:
        print(f"    could not stop {'; '.join(describe(survivors))}: stop them by hand", file=sys.stderr, flush=True)
    else:
        print(f"    stopped {len(leftovers)} processes", flush=True)
    return leftovers, survivors


def launch(
    env: dict, var_dir: Path, *, with_redis: bool, only: set[str] | None = None, node: bool = False
) -> list[str]:
    """The configuration written and the last run's records cleared: the argv that starts supervisord
    (through the recorder, as each of its programs). ``node``: a joined node's programs (scripts/node.py)."""
    if with_redis:
        write_redis_acl(var_dir)
    write_config(env, with_redis=with_redis, var_dir=var_dir, only=only, node=node)
    new_run(var_dir)
    return recorded(var_dir, "supervisord", supervisord(var_dir))


def clear_last_run(var_dir: Path) -> None:
    """Refuse a second run beside a live one; stop whatever a killed run left (`make run`, `make node`)."""
    supervisor = running_supervisord(var_dir)
    if supervisor is not None:
        raise SystemExit(f"qwenweb is already running (supervisord, pid {supervisor.pid}); `make stop` stops it.")
    # Before anything picks a port: the last run's Redis and llama-server would still hold theirs.
    if stop_leftovers(var_dir, "stopping what the last run left running (its supervisord was killed)")[1]:
        raise SystemExit(1)


def run() -> None:
    clear_last_run(configured_var_dir())
    env, with_redis = prepare()
    argv = launch(env, Path(env["QWENWEB_VAR_DIR"]), with_redis=with_redis)
    step(f"starting every part under supervisord ({argv[-1]}); logs in var/log/; Ctrl-C or `make stop` stops all")
    os.chdir(ROOT)
    os.execve(argv[0], argv, env)


def stop_all(var_dir: Path) -> int:
    """`make stop`: supervisord stops its programs when it is alive; whatever is left (everything,
    when supervisord was killed) is stopped here."""
    supervisor = running_supervisord(var_dir)
    shut_down = False
    if (var_dir / "run" / "supervisor.sock").exists():
        # Also reaches a supervisord started before runs were marked; refused when it is gone.
        asked = subprocess.run(supervisorctl(var_dir, "shutdown"), check=False, capture_output=True, text=True)
        shut_down = asked.returncode == 0
        if shut_down:
            step("supervisord is stopping every part")
    if supervisor is not None:
        wait_gone([supervisor], SHUTDOWN_WAIT_S)
    why = "stopping what supervisord left running" if supervisor else "supervisord is gone; stopping the parts it left"
    stopped, survivors = stop_leftovers(var_dir, why)
    if not (shut_down or supervisor or stopped):
        print("Nothing of qwenweb is running.")
    return 1 if survivors else 0


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else "run"
    if command == "stop":
        raise SystemExit(stop_all(configured_var_dir()))
    if command == "prepare":
        prepare()
        return
    run()


if __name__ == "__main__":
    main()
