"""How long, and how much memory, does `felab compare` take on large records?

Two synthetic `felab bench --json` records of N requests each (one run, or a sweep of L runs
for a size written L@N; 16 tokens a request, so 15 inter-token gaps, or T tokens a request for
a size written NxT; chunk times as felab writes them; B 10 ms slower to its first token),
compared by the real `felab compare` command in its own process: wall time and the process's
peak memory (ru_maxrss), the median of --repeat runs.

    .venv/bin/python benchmarks/compare_large.py [--sizes 20000,20x20000,64@1000] [--repeat 3]

Writes benchmarks/results/compare_large.json and prints a Markdown table for the docs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
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
from felab_core.engine.record_seal import sealed_text  # noqa: E402

TOKENS = 16
GAP_S = 0.01


def record(
    n: int, ttft_s: float, seed: int, tokens: int = TOKENS, loads: int = 1
) -> dict[str, Any]:
    """A record shaped as felab writes one: every request with its figures and chunk times, in
    `loads` runs (a concurrency sweep 1..loads, each run the same requests)."""
    rng = random.Random(seed)
    requests = []
    ends: list[float] = []
    for i in range(n):
        first = ttft_s + rng.gauss(0, 0.003)
        gaps = [GAP_S + rng.gauss(0, 0.0005) for _ in range(tokens - 1)]
        times = [first]
        for g in gaps:
            times.append(times[-1] + g)
        ends.append(times[-1])
        requests.append(
            {
                "index": i,
                "ok": True,
                "cold": False,
                "ttft_s": first,
                "tpot_s": sum(gaps) / len(gaps),
                "e2e_s": times[-1],
                "writing_tps": len(gaps) / sum(gaps),
                "output_tokens": tokens,
                "first_chunk_tokens": 1.0,
                "itl_s": gaps,
                "chunk_times_s": times,
            }
        )
    busy = sum(ends)  # a run lasts as long as its streams took,
    longest = max(ends)  # and at least its longest request
    return {
        "schema": SCHEMA,
        "target": {"model": "m", "api": "openai-chat"},
        "server": {"kind": "llamacpp", "version": "b1"},
        "workload": {"preset": "sweep", "prompt_tokens": 256, "max_tokens": tokens},
        "runs": [
            {
                "concurrency": streams,
                "rate": None,
                "requests": requests,
                "summary": {"ok": n, "duration_s": max(busy / streams, longest)},
            }
            for streams in ([64] if loads == 1 else range(1, loads + 1))
        ],
    }


def one_compare(a: Path, b: Path) -> tuple[float, float]:
    """Seconds and peak MB of one `felab compare a b` in its own process (os.wait4 gives that
    child's own peak; RUSAGE_CHILDREN would give the largest child so far)."""
    with tempfile.TemporaryFile() as out:
        started = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, "-m", "felab", "compare", str(a), str(b), "-o", "json"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.monotonic() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            out.seek(0)
            said = out.read().decode(errors="replace")[-2000:]
            raise SystemExit(f"felab compare failed:\n{said}")
    return seconds, usage.ru_maxrss / 1024


def _size(text: str) -> tuple[int, int, int]:
    """'20000' (requests of 16 tokens), '20x20000' (20 requests of 20,000 tokens) or '64@1000'
    (a 64-load sweep of 1,000 requests a load): loads, requests, tokens."""
    loads, _, rest = text.strip().rpartition("@")
    n, _, tokens = rest.partition("x")
    return int(loads or 1), int(n), int(tokens or TOKENS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes",
        default="20000,200000,20x20000",
        help="requests per record, comma list; NxT for N requests of T tokens (16 otherwise); "
        "L@N for a sweep of L loads of N requests each",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "compare_large.json"
    )
    ap.add_argument("--quick", action="store_true", help="one record of 500 requests, once")
    args = ap.parse_args()
    quick = [(1, 500, TOKENS), (1, 4, 5000), (3, 200, TOKENS)]
    sizes = quick if args.quick else [_size(x) for x in args.sizes.split(",")]
    repeat = 1 if args.quick else args.repeat
    rows = []
    with tempfile.TemporaryDirectory(prefix="felab-compare-") as tmp:
        for loads, n, tokens in sorted(sizes, key=lambda s: s[0] * s[1] * s[2]):
            name = f"{loads}at{n}x{tokens}.json"
            a, b = Path(tmp) / f"a{name}", Path(tmp) / f"b{name}"
            a.write_text(sealed_text(record(n, 0.050, 1, tokens, loads)))  # sealed, as felab
            b.write_text(sealed_text(record(n, 0.060, 2, tokens, loads)))  # bench writes them
            runs = [one_compare(a, b) for _ in range(repeat)]
            rows.append(
                {
                    "loads": loads,
                    "requests_per_record": n,
                    "tokens_per_request": tokens,
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
    print(
        "| loads | requests a load | tokens a request | record size | time (median) | peak memory |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['loads']} | {r['requests_per_record']:,} | {r['tokens_per_request']:,} "
            f"| {r['record_mb']} MB "
            f"| {r['seconds_median']} s | {r['peak_mb']} MB |"
        )
    if not args.quick:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
