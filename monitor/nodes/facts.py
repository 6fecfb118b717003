"""What a node tells the main box about itself when it joins and at every start.

Its GPUs and their VRAM (NVML; a machine without an NVIDIA driver has none, and says why), RAM, CPU
cores, llama-server's build (its ``--version``) and the models in its models folder, each with its
size and SHA256. Hashing a folder of tens of GB at every start would take minutes, so each file's
SHA256 is kept in ``var/model_hashes.json`` by path, size and modification time, and computed again
only for a file that changed. No Django here: `make node` gathers them before any setting exists.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import psutil

from monitor.nodes.private_files import write_private

HASH_CACHE = "model_hashes.json"
VERSION_TIMEOUT_S = 20
MAX_MODELS = 500


def gather(models_dir: Path, llama_binary: str, var_dir: Path, gpus: tuple[list, str]) -> dict:
    """The node's facts, as the join and the registration send them (``NodeFactsForm`` checks them).
    ``gpus``: what ``monitor.telemetry.gpu.detect_gpus`` found (its GPUs, why none), read by the caller."""
    found, why = gpus
    return {
        "gpus": [{"index": gpu.index, "name": gpu.name, "total_bytes": gpu.total_bytes} for gpu in found],
        "gpu_note": "" if found else (why or "NVML found no GPU"),
        "ram_bytes": psutil.virtual_memory().total,
        "cpu_cores": psutil.cpu_count(logical=True) or 1,
        "llama_server": llama_server_build(llama_binary),
        "models": model_files(models_dir, var_dir / HASH_CACHE),
    }


def llama_server_build(binary: str) -> str:
    """What ``llama-server --version`` says (its version and compiler lines), or why it could not say."""
    try:
        done = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unknown ({error})"[:200]
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    wanted = [line for line in lines if line.startswith(("version:", "built with"))] or lines[:2]
    return "; ".join(wanted)[:200]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def model_files(models_dir: Path, cache_path: Path) -> list[dict]:
    """Every GGUF file under ``models_dir``: name (relative), size, SHA256; hashes reused from the cache
    while a file's size and modification time are the same."""
    try:
        cache = json.loads(cache_path.read_text())
    except (OSError, ValueError):
        cache = {}
    found, kept = [], {}
    for path in sorted(models_dir.rglob("*.gguf"))[:MAX_MODELS] if models_dir.is_dir() else []:
        try:
            stat = path.stat()  # through a link: the file it names
        except OSError:
            continue
        name = str(path.relative_to(models_dir))
        known = cache.get(name)
        unchanged = known and known[:2] == [stat.st_size, stat.st_mtime_ns]
        digest = known[2] if unchanged else sha256_of(path)
        kept[name] = [stat.st_size, stat.st_mtime_ns, digest]
        found.append({"name": name, "size": stat.st_size, "sha256": digest})
    write_private(cache_path, json.dumps(kept))
    return found


def remember_hashes(models_dir: Path, cache_path: Path, hashes: dict[str, str]) -> None:
    """Files whose SHA256 is already known (a download hashed them while writing them), name -> SHA256,
    into the cache as they are on disk now: ``model_files`` will not read them again."""
    try:
        cache = json.loads(cache_path.read_text())
    except (OSError, ValueError):
        cache = {}
    for name, digest in hashes.items():
        try:
            stat = (models_dir / name).stat()
        except OSError:
            continue
        cache[name] = [stat.st_size, stat.st_mtime_ns, digest]
    write_private(cache_path, json.dumps(cache))


def summary(facts: dict) -> str:
    """One line for a console: GPUs (or why none), RAM, cores, models."""
    gib = 1024**3
    gpus = ", ".join(f"{gpu['name']} ({gpu['total_bytes'] / gib:.1f} GiB)" for gpu in facts["gpus"])
    return (
        f"GPUs: {gpus or 'none (' + facts['gpu_note'] + ')'}; RAM {facts['ram_bytes'] / gib:.1f} GiB; "
        f"{facts['cpu_cores']} CPU cores; {len(facts['models'])} model files; llama-server {facts['llama_server']}"
    )
