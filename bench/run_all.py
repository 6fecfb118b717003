"""`make bench`: the benchmarks behind the figures the open issues name and the patches' gains (``OPEN``),
each printing name=value figures; `make bench BENCHES=all` runs every benchmark in bench/ (53 minutes on
the 2-core development host), `make bench BENCHES="kb_bench.py soak_bench.py"` only those.

Each bench's wall time is printed as `bench_s.<name>=` and the whole run's as `bench_total_s=`, so the
30-minute budget of `make bench` is seen to hold. The soak runs 5 minutes here unless `QWENWEB_SOAK_S`
says otherwise.
"""

import os
import subprocess
import sys
import time
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
    "login_bench.py",
    "ledger_bench.py",
    "tool_bench.py",
]
# Issue 48 (the round's figures against its start: the pool, the ratios and TTFTs, CPU per token, the
# transport against httpx, restarts and hangs, the product's lines), 49 (embeddings, knowledge), 50 (logins,
# the ledger), 51 (tools), 52 (resume, the soak), and the patches' gains (docs/patches.md).
OPEN = [
    "product_lines.py",
    "pool_bench.py",
    "resume_bench.py",
    "stream_bench.py",
    "api_bench.py",
    "embed_bench.py",
    "cpu_bench.py",
    "transport_bench.py",
    "patches_bench.py",
    "restart_bench.py",
    "soak_bench.py",
    "kb_bench.py",
    "login_bench.py",
    "ledger_bench.py",
    "tool_bench.py",
]


asked = os.environ.get("BENCHES", "").split()
chosen = BENCHES if asked == ["all"] else asked or OPEN
unknown = sorted(set(chosen) - set(BENCHES))
if unknown:
    sys.exit(f"unknown benches: {' '.join(unknown)} (known: {' '.join(BENCHES)})")

# The soak's full length (10-15 minutes, `QWENWEB_SOAK_S=900 make bench BENCHES=soak_bench.py`) would
# take half of the 30-minute budget alone: within `make bench` it runs 5 minutes unless told otherwise.
os.environ.setdefault("QWENWEB_SOAK_S", "300")

failed = False
run_started = time.monotonic()
for name in chosen:
    print(f"== {name}", flush=True)
    started = time.monotonic()
    result = subprocess.run([sys.executable, str(Path(__file__).parent / name)])
    print(f"bench_s.{name.removesuffix('.py')}={time.monotonic() - started:.0f}", flush=True)
    failed |= result.returncode != 0
print(f"bench_total_s={time.monotonic() - run_started:.0f}", flush=True)
sys.exit(1 if failed else 0)
