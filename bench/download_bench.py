"""Download throughput over loopback, hashing on, beside curl fetching the same file.

Both fetch the real default model file from the same loopback server in the same
run, alternating, 5 times each; prints `download_ratio=` (our MB/s ÷ curl's, medians) and the
spread of the 5 runs' own ratios (`download_ratio_min=`, `download_ratio_max=`).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

RUNS = 5


class MirrorProcess:
    """tests/support/file_server.py's loopback mirror, run as a child process."""

    def __init__(self, root: Path):
        argv = [sys.executable, "-m", "tests.support.file_server", str(root)]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=stack.ROOT)
        self.port = int(self.process.stdout.readline())

    def url(self, mode: str, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/{name}"

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(10)


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-download-")
    from monitor.catalog.download_jobs import create_job
    from monitor.catalog.downloads import run_job
    from scripts.local_services import sha256_file

    models = Path(os.environ["QWENWEB_MODELS_DIR"])
    source = (models / "gemma-3-270m-q4_k_m.gguf").resolve()
    mirror_root = run_dir / "mirror"
    mirror_root.mkdir()
    size = source.stat().st_size
    expected = sha256_file(source)
    ours, curl = [], []
    # The mirror runs in a process of its own, as a real one would: in ours, its thread would
    # compete with the download's threads for the interpreter lock, which curl never does.
    server = MirrorProcess(mirror_root)
    try:
        for run in range(RUNS):
            name = f"copy{run}.gguf"
            (mirror_root / name).symlink_to(source)

            def fetch_with_curl(name=name):
                os.sync()  # neither side pays for the other's writeback
                started = time.perf_counter()
                subprocess.run(["curl", "-sSf", "-o", str(run_dir / "curl.out"), server.url("ok", name)], check=True)
                curl.append(size / (time.perf_counter() - started) / 1e6)
                (run_dir / "curl.out").unlink()

            def fetch_with_qwenweb(name=name):
                job = create_job(None, server.url("ok", name), expected)
                os.sync()
                started = time.perf_counter()
                job = run_job(job.id)
                ours.append(size / (time.perf_counter() - started) / 1e6)
                assert job.status == "done", job.error
                (models / name).unlink()

            for fetch in (fetch_with_curl, fetch_with_qwenweb) if run % 2 else (fetch_with_qwenweb, fetch_with_curl):
                fetch()
            print(f"run {run + 1}: qwenweb {ours[-1]:.0f} MB/s (SHA256 verified) | curl {curl[-1]:.0f} MB/s")
    finally:
        server.close()
    print(f"download_mb_s={statistics.median(ours):.0f} curl_mb_s={statistics.median(curl):.0f}")
    ratios = [mine / theirs for mine, theirs in zip(ours, curl, strict=True)]
    print(
        f"download_ratio={statistics.median(ours) / statistics.median(curl):.3f} "
        f"download_ratio_min={min(ratios):.3f} download_ratio_max={max(ratios):.3f}"
    )


if __name__ == "__main__":
    main()
