"""Does a replayed trace leave on the trace's own times? A Mooncake-format trace sent to the
scripted server, the error measured twice: on the client (each request's send against its
place on the schedule) and at the server (each request's arrival against the trace's time,
aligned on the median offset). The goal: within 1 ms.

The scripted server runs in this process (a thread), as in the tests, so its stamps include its
own wait for the GIL: the client-side figure is the engine's, the server-side one an upper bound.

    .venv/bin/python benchmarks/trace_replay.py            # 1,000 requests at ~50 and ~200 req/s
    .venv/bin/python benchmarks/trace_replay.py --quick    # 60 requests, seconds
Writes benchmarks/results/trace_replay.json and prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import time
from pathlib import Path
from typing import Any

from felab_core.engine.runner import bench_target
from felab_core.engine.targets import DEFAULT_TARGETS, resolve_target
from felab_core.engine.trace import parse_trace
from felab_core.engine.workloads import Workload
from felab_core.lab.scripted_server import Script, ScriptedServer

HERE = Path(__file__).parent


def _trace(count: int, rate: float, seed: int) -> str:
    """A Poisson day in Mooncake's format: 512-token blocks, a shared system prompt on half."""
    rng = random.Random(seed)
    t, lines = 0.0, []
    for i in range(count):
        ids = ([0, 1] if i % 2 else []) + [100 + 3 * i, 101 + 3 * i]
        row = {"timestamp": round(t * 1000, 3), "input_length": 2048, "output_length": 4}
        row["hash_ids"] = ids
        lines.append(json.dumps(row))
        t += rng.expovariate(rate)
    return "\n".join(lines) + "\n"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(count: int, rate: float, seed: int) -> dict[str, Any]:
    trace = parse_trace(_trace(count, rate, seed), name="bench.jsonl", block_size=512)
    server = ScriptedServer(Script(persona="llamacpp", ttft_s=0.002, itl_s=0.001))
    server.start_in_thread()
    try:
        target = resolve_target("llamacpp", targets=DEFAULT_TARGETS, url=server.base_url)
        workload = Workload(
            concurrency=(0,), requests=None, warmup=1, max_tokens=4, trace=trace, preset="trace"
        )
        t0 = time.perf_counter()
        result = asyncio.run(bench_target(target, workload, check_server=False))
        wall = time.perf_counter() - t0
    finally:
        server.stop_thread()
    run = result.runs[0]
    client_ms = [abs(m.dispatch_lag_s or 0.0) * 1e3 for m in run.requests]
    timed = server.log[1:]
    want = trace.offsets_s()
    got = [e.received_ns / 1e9 for e in timed]
    offset = statistics.median(g - w for g, w in zip(got, want, strict=True))
    server_ms = [abs(g - w - offset) * 1e3 for g, w in zip(got, want, strict=True)]
    return {
        "requests": count,
        "rate": rate,
        "span_s": round(trace.span_s, 2),
        "wall_s": round(wall, 2),
        "client_send_error_ms": {
            "p50": round(statistics.median(client_ms), 3),
            "p99": round(_pct(client_ms, 0.99), 3),
        },
        "server_arrival_error_ms": {
            "p50": round(statistics.median(server_ms), 3),
            "p99": round(_pct(server_ms, 0.99), 3),
        },
        "ok": run.summary.ok,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 requests: a smoke run")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    count = 60 if args.quick else args.requests
    rows = [measure(count, rate, args.seed) for rate in (50.0, 200.0)]
    out = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {platform.node()}, Python {platform.python_version()}",
        "quick": args.quick,
        "runs": rows,
    }
    if not args.quick:
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / "trace_replay.json").write_text(json.dumps(out, indent=1) + "\n")
    print("| trace | requests | send error p50 / p99 | arrival error p50 / p99 | ok |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        c, s = r["client_send_error_ms"], r["server_arrival_error_ms"]
        print(
            f"| Poisson {r['rate']:g} req/s, {r['span_s']} s | {r['requests']} | "
            f"{c['p50']} / {c['p99']} ms | {s['p50']} / {s['p99']} ms | {r['ok']} |"
        )


if __name__ == "__main__":
    main()
