"""`make test-postgres`: the whole test suite against a real PostgreSQL.

A private cluster, like the tests' private Redis: Debian's PostgreSQL binaries, a data
folder in a temporary directory, a free loopback port, a random password; run as the
``postgres`` system user when this runs as root (PostgreSQL refuses root). It is
stopped and deleted afterwards.

Usage: python scripts/test_postgres.py [PYTEST ARGS...]   (default: every test)
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.local_services import free_port  # noqa: E402

DEFAULT_TESTS = ["tests"]
DATABASE = "qwenweb"


def postgres_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if not found:
        raise SystemExit(
            "PostgreSQL is not installed: apt-get install postgresql (make test-postgres does it as root)."
        )
    return found[-1].parent


def as_cluster_user(argv: list[str]) -> list[str]:
    """PostgreSQL will not run as root: run it as the ``postgres`` user Debian's package creates."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def start_cluster(folder: Path, port: int, password: str) -> subprocess.Popen:
    binaries = postgres_bin()
    data, sockets = folder / "data", folder / "sockets"
    sockets.mkdir()
    pwfile = folder / "password"
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        for path in (folder, sockets, pwfile):
            os.chown(path, account.pw_uid, account.pw_gid)
    initdb = [str(binaries / "initdb"), "-D", str(data), "-U", "qwenweb", "--pwfile", str(pwfile)]
    initdb += ["--auth", "scram-sha-256", "--encoding", "UTF8", "--locale", "C"]
    subprocess.run(as_cluster_user(initdb), check=True, stdout=subprocess.DEVNULL)
    server = [str(binaries / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets)]
    server += ["-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "fsync=off"]
    log = (folder / "postgres.log").open("ab")
    return subprocess.Popen(as_cluster_user(server), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_and_create_database(port: int, password: str) -> None:
    import psycopg

    deadline = time.monotonic() + 60
    while True:
        try:
            with psycopg.connect(
                host="127.0.0.1", port=port, user="qwenweb", password=password, dbname="postgres", autocommit=True
            ) as connection:
                connection.execute(f"CREATE DATABASE {DATABASE}")
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def main(args: list[str]) -> int:
    folder = Path(tempfile.mkdtemp(prefix="qwenweb-postgres-"))
    port, password = free_port(), secrets.token_urlsafe(16)
    server = start_cluster(folder, port, password)
    try:
        wait_and_create_database(port, password)
        env = {**os.environ, "DATABASE_URL": f"postgres://qwenweb:{password}@127.0.0.1:{port}/{DATABASE}"}
        print(f"==> PostgreSQL on 127.0.0.1:{port} ({folder}); running the tests against it", flush=True)
        pytest = [sys.executable, "-m", "pytest", *(args or DEFAULT_TESTS)]
        return subprocess.run(pytest, env=env, cwd=ROOT, check=False).returncode
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
