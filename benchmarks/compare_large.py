"""How long, and how much memory, does `felab compare` take on large records?

Two synthetic `felab bench --json` records of N requests each (one run; 16 tokens a request,
so 15 inter-token gaps, chunk times as felab writes them; B 10 ms slower to its first token),
compared by the real `felab compare` command in its own process: wall time and the process's
peak memory (ru_maxrss), the median of --repeat runs.

    .venv/bin/python benchmarks/compare_large.py [--sizes 20000,200000] [--repeat 3]

Writes benchmarks/results/compare_large.json and prints a Markdown table for the docs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from felab_core.engine.measure import SCHEMA  # noqa: E402

TOKENS = 16
GAP_S = 0.01


def record(n: int, ttft_s: float, seed: int) -> dict[str, Any]:
    """A record shaped as felab writes one: every request with its figures and chunk times."""
    rng = random.Random(seed)
    requests = []
    for i in range(n):
        first = ttft_s + rng.gauss(0, 0.003)
        gaps = [GAP_S + rng.gauss(0, 0.0005) for _ in range(TOKENS - 1)]
        times = [first]
        for g in gaps:
            times.append(times[-1] + g)
        requests.append(
            {
                "index": i,
                "ok": True,
                "cold": False,
                "ttft_s": first,
                "tpot_s": sum(gaps) / len(gaps),
                "e2e_s": times[-1],
                "writing_tps": len(gaps) / sum(gaps),
                "output_tokens": TOKENS,
                "itl_s": gaps,
                "chunk_times_s": times,
            }
        )
    return {
        "schema": SCHEMA,
        "target": {"model": "m", "api": "openai-chat"},
        "server": {"kind": "llamacpp", "version": "b1"},
        "workload": {"preset": "sweep", "prompt_tokens": 256, "max_tokens": TOKENS},
        "runs": [{"concurrency": 64, "rate": None, "requests": requests}],
    }


def one_compare(a: Path, b: Path) -> tuple[float, float]:
    """Seconds and peak MB of one `felab compare a b` in its own process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "felab", "compare", str(a), str(b), "-o", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"felab compare failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is the largest child so far: measure each size from small to large.
    return seconds, max(peak_kb, before) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20000,200000", help="requests per record, comma list")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "compare_large.json"
    )
    ap.add_argument("--quick", action="store_true", help="one record of 500 requests, once")
    args = ap.parse_args()
    sizes = [500] if args.quick else sorted(int(x) for x in args.sizes.split(","))
    repeat = 1 if args.quick else args.repeat
    rows = []
    with tempfile.TemporaryDirectory(prefix="felab-compare-") as tmp:
        for n in sizes:
            a, b = Path(tmp) / f"a{n}.json", Path(tmp) / f"b{n}.json"
            a.write_text(json.dumps(record(n, 0.050, 1)))
            b.write_text(json.dumps(record(n, 0.060, 2)))
            runs = [one_compare(a, b) for _ in range(repeat)]
            rows.append(
                {
                    "requests_per_record": n,
                    "record_mb": round(a.stat().st_size / 1e6, 1),
                    "seconds_median": round(statistics.median(s for s, _ in runs), 2),
                    "peak_mb": round(max(m for _, m in runs)),
                    "runs": repeat,
                }
            )
    result = {
        "date": datetime.now(UTC).isoformat(timespec="minutes"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
        "rows": rows,
    }
    print(json.dumps(result, indent=1))
    print()
    print("| requests per record | record size | time (median) | peak memory |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['requests_per_record']:,} | {r['record_mb']} MB | {r['seconds_median']} s "
            f"| {r['peak_mb']} MB |"
        )
    if not args.quick:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
