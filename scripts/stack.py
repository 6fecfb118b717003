"""Set up and run the whole product under supervisord (see scripts/supervisor_config.py).

Usage: python scripts/stack.py run     (from `make run`: supervisord in the foreground, Ctrl-C stops all)
       python scripts/stack.py prepare (everything but starting the processes)
       python scripts/stack.py stop    (from `make stop`: asks a running supervisord to stop everything)
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.local_services import (  # noqa: E402
    ensure_default_model,
    free_port,
    redis_reachable,
    redis_server_binary,
)
from scripts.supervisor_config import supervisorctl, supervisord, write_config  # noqa: E402


def step(message: str) -> None:
    print(f"==> {message}", flush=True)


def manage(*args: str, env: dict) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], check=True, env=env, cwd=ROOT)


def llama_binary() -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_llama_server.py")], check=True, stdout=subprocess.PIPE, text=True
    )
    return result.stdout.strip().splitlines()[-1]


def prepare() -> tuple[dict, bool]:
    env = dict(os.environ)
    var_dir = Path(env.setdefault("QWENWEB_VAR_DIR", str(ROOT / "var"))).resolve()
    env["QWENWEB_VAR_DIR"] = str(var_dir)
    var_dir.mkdir(parents=True, exist_ok=True)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("DJANGO_SETTINGS_MODULE", "qwenweb.settings")
    env["PYTHONUNBUFFERED"] = "1"

    step("llama-server")
    env["LLAMA_SERVER_BIN"] = llama_binary()
    print(f"    {env['LLAMA_SERVER_BIN']}")

    step("default model (Gemma 3 270M Q4_K_M)")
    models_dir = Path(env.setdefault("QWENWEB_MODELS_DIR", str(var_dir / "models")))
    print(f"    {ensure_default_model(models_dir)} (SHA256 verified)")

    with_redis = False
    step("Redis")
    if env.get("REDIS_URL") and redis_reachable(env["REDIS_URL"]):
        print(f"    using {env['REDIS_URL']}")
    else:
        binary = redis_server_binary()
        if binary is None:
            raise SystemExit("No redis-server found: install Debian's redis-server or set REDIS_URL.")
        port = free_port(int(env.get("QWENWEB_REDIS_PORT", "6390")))
        (var_dir / "redis").mkdir(exist_ok=True)
        env.update(REDIS_SERVER_BIN=binary, QWENWEB_REDIS_PORT=str(port), REDIS_URL=f"redis://127.0.0.1:{port}/0")
        with_redis = True
        print(f"    private redis-server on 127.0.0.1:{port}, data in {var_dir / 'redis'}")

    env.setdefault("QWENWEB_BIND", "0.0.0.0")
    env["QWENWEB_PORT"] = env.get("QWENWEB_PORT", "8000")
    if "LLAMA_SERVER_URL" not in env:
        env["LLAMA_SERVER_URL"] = f"http://127.0.0.1:{free_port(int(env.get('QWENWEB_LLAMA_PORT', '8081')))}"

    step("translations, database")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "compile_messages.py")], check=True)
    manage("migrate", "--noinput", "-v", "0", env=env)
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


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else "run"
    if command == "stop":
        raise SystemExit(subprocess.run(supervisorctl(configured_var_dir(), "shutdown"), check=False).returncode)
    env, with_redis = prepare()
    if command == "prepare":
        return
    config = write_config(env, with_redis=with_redis, var_dir=Path(env["QWENWEB_VAR_DIR"]))
    step(f"starting every part under supervisord ({config}); logs in var/log/; Ctrl-C or `make stop` stops all")
    argv = supervisord(Path(env["QWENWEB_VAR_DIR"]))
    os.chdir(ROOT)
    os.execve(argv[0], argv, env)


if __name__ == "__main__":
    main()
