"""`make bench`: run every benchmark in bench/, each printing name=value figures."""

import subprocess
import sys
from pathlib import Path

BENCHES = [
    "product_lines.py",
    "queue_bench.py",
    "pool_bench.py",
    "resume_bench.py",
    "stream_bench.py",
    "pacing_bench.py",
    "planner_bench.py",
    "ram_bench.py",
    "mtp_bench.py",
    "download_bench.py",
    "api_bench.py",
    "embed_bench.py",
    "cpu_bench.py",
    "relay_floor_bench.py",
    "transport_bench.py",
    "patches_bench.py",
    "profile_bench.py",
    "sampler_bench.py",
    "selftest_bench.py",
    "extract_bench.py",
    "restart_bench.py",
    "summary_contention_bench.py",
    "soak_bench.py",
    "kb_bench.py",
]

failed = False
for name in BENCHES:
    print(f"== {name}", flush=True)
    result = subprocess.run([sys.executable, str(Path(__file__).parent / name)])
    failed |= result.returncode != 0
sys.exit(1 if failed else 0)
