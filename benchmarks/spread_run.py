"""Do the slices of a spread run start together, even when a machine's clock is wrong?

Two "machines" are two OS processes, each running the worker's own job code
(felab_core.jobs.run.execute) for its slice of one closed-loop run, against one scripted server
in this process. The "broker" clock is this process's wall clock; machine B is given a wall clock
`--skew` seconds behind it (its broker reading says the broker is ahead), as a Mac whose clock
drifted would be. Each machine measures its offset to the broker the way a real one does (best
of 7 round trips) and turns the shared start into its own monotonic clock.

What is measured, on the server's clock (one box, one CLOCK_MONOTONIC):
- each slice's first arrivals against the shared start: how late each machine began;
- what the same skew would have cost without the correction (the skew itself);
- the merged run (the ingest's merge of the per-request records) against the same run from one
  machine: TTFT and writing speed p50, which should agree.

    .venv/bin/python benchmarks/spread_run.py [--skew 1.5] [--runs 5]
    .venv/bin/python benchmarks/spread_run.py --quick     # one short run, seconds
Writes benchmarks/results/spread_run.json (not with --quick) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from felab_core.engine.merge import ShardRecords, merge_shards, request_from_wire  # noqa: E402
from felab_core.jobs.messages import JobMessage  # noqa: E402
from felab_core.jobs.run import execute  # noqa: E402
from felab_core.jobs.workload import Limits  # noqa: E402
from felab_core.lab.scripted_server import Script, ScriptedServer  # noqa: E402

LIMITS = Limits(concurrency=256, requests=10_000, max_tokens=4096, per_hour=1000)
LEAD_S = 4.0


def _broker_clock() -> Callable[[], float]:
    """The broker's clock: Redis's TIME on this box when it answers (a real round trip),
    else this box's wall clock."""
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=1)
        client.time()
    except Exception:
        return time.time

    def read() -> float:
        seconds, micros = client.time()
        return float(seconds) + float(micros) / 1e6

    return read


def _slice(msg: dict[str, Any], targets: str, skew_s: float) -> None:
    """One machine whose wall clock is `skew_s` behind: run its slice, print its events."""
    broker = _broker_clock()
    real = time.time
    time.time = lambda: real() - skew_s  # this machine's clock, wrong by skew_s
    events: list[dict[str, Any]] = []
    execute(
        JobMessage.from_dict(msg),
        targets_file=Path(targets),
        limits=LIMITS,
        emit=events.append,
        broker_clock=broker,
    )
    time.time = real
    print(json.dumps([e for e in events if e["kind"] in ("result", "failed")]))


def _spawn(msg: JobMessage, targets: Path, skew_s: float) -> subprocess.Popen[str]:
    args = [sys.executable, __file__, "--slice", json.dumps(msg.to_dict()), str(targets)]
    return subprocess.Popen(
        [*args, "--skew", str(skew_s)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )


def one_run(server: ScriptedServer, targets: Path, skew_s: float, params: dict[str, int]) -> dict:
    broker = _broker_clock()
    start_at = broker() + LEAD_S  # on the broker's clock, as the dispatcher writes it
    start_mono_ns = time.monotonic_ns() + int((start_at - broker()) * 1e9)
    skews = [0.0, skew_s]
    msgs = [
        JobMessage(
            job_id=1 + i,
            attempt=f"a{i}",
            worker_id=1 + i,
            target="vllm",
            preset="quick",
            params=params,
            shard=i,
            shards=2,
            start_at=start_at,
        )
        for i in range(2)
    ]
    seen_from = len(server.log)
    procs = [_spawn(msg, targets, skew) for msg, skew in zip(msgs, skews, strict=True)]
    outs = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
    reports = []
    for i, events in enumerate(outs):
        last = events[-1]
        if last["kind"] != "result":
            raise SystemExit(f"slice {i + 1} failed: {last['body']['reason']}")
        reports.append(last["body"]["shard"])
    # The server's own arrival stamps: the first request of each user, after the shared start.
    timed = [e for e in server.log[seen_from:] if e.received_ns >= start_mono_ns - 50_000_000]
    firsts = sorted(e.received_ns for e in timed)[: params["concurrency"]]
    late_ms = [(t - start_mono_ns) / 1e6 for t in firsts]
    records = [
        ShardRecords(
            shard=i,
            requests=[request_from_wire(r) for r in rep["requests"]],
            started_ns=int(rep["start_at"] * 1e9),
            ended_ns=int((rep["start_at"] + rep["duration_s"]) * 1e9),
        )
        for i, rep in enumerate(reports)
    ]
    merged = merge_shards(records, shards=2)
    s = merged.summary
    assert s.ttft_s is not None and s.writing_tps is not None
    return {
        "offsets_ms": [round(r["clock"]["offset_s"] * 1e3, 3) for r in reports],
        "rtt_ms": [round(r["clock"]["rtt_s"] * 1e3, 3) for r in reports],
        "first_arrival_after_start_ms": {
            "min": round(min(late_ms), 2),
            "p50": round(statistics.median(late_ms), 2),
            "max": round(max(late_ms), 2),
        },
        "merged": {
            "requests": s.ok + s.failed,
            "ttft_p50_ms": round(s.ttft_s.p50 * 1e3, 2),
            "writing_tps_p50": round(s.writing_tps.p50, 1),
            "partial": merged.partial_reason,
        },
    }


def one_machine(targets: Path, params: dict[str, int]) -> dict[str, float]:
    """The same run from one machine (the same job code, no slices), for comparison."""
    events: list[dict[str, Any]] = []
    msg = JobMessage(job_id=9, attempt="b", worker_id=9, target="vllm", preset="quick",
                     params=params)  # fmt: skip
    execute(msg, targets_file=targets, limits=LIMITS, emit=events.append)
    row = events[-1]["body"]["rows"][0]
    return {
        "ttft_p50_ms": round(float(row["ttft_p50_s"]) * 1e3, 2),
        "writing_tps_p50": round(float(row["writing_tps_p50"]), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skew", type=float, default=1.5, help="Machine B's clock error, s.")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one short run: a smoke test")
    parser.add_argument("--slice", nargs=2, metavar=("MSG", "TARGETS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.slice:
        _slice(json.loads(args.slice[0]), args.slice[1], args.skew)
        return
    params = {"concurrency": 8, "requests": 16 if args.quick else 96, "max_tokens": 32}
    runs = 1 if args.quick else args.runs
    server = ScriptedServer(Script(persona="vllm", ttft_s=0.02, itl_s=0.01)).start_in_thread()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            targets = Path(tmp) / "targets.toml"
            targets.write_text(
                f'[targets.vllm]\nurl = "http://127.0.0.1:{server.port}"\nmodel = "m"\n'
            )
            results = [one_run(server, targets, args.skew, params) for _ in range(runs)]
            single = one_machine(targets, params)
    finally:
        server.stop_thread()
    print(f"2 machines (processes), machine B's clock {args.skew:+.1f} s off; "
          f"{params['concurrency']} users, {params['requests']} requests, "
          f"{params['max_tokens']} tokens; scripted server: TTFT 20 ms, ITL 10 ms\n")  # fmt: skip
    print("| run | offsets A / B (ms) | best RTT A / B (ms) | first arrivals after the start "
          "min / p50 / max (ms) | merged TTFT p50 | merged tok/s p50 |")  # fmt: skip
    print("|---:|---|---|---|---:|---:|")
    for i, r in enumerate(results, 1):
        f = r["first_arrival_after_start_ms"]
        mg = r["merged"]
        print(f"| {i} | {r['offsets_ms'][0]:+.3f} / {r['offsets_ms'][1]:+.3f} | "
              f"{r['rtt_ms'][0]:.3f} / {r['rtt_ms'][1]:.3f} | {f['min']} / {f['p50']} / "
              f"{f['max']} | {mg['ttft_p50_ms']} ms | {mg['writing_tps_p50']} |")  # fmt: skip
    print(f"\nOne machine, same run: TTFT p50 {single['ttft_p50_ms']} ms, "
          f"tok/s p50 {single['writing_tps_p50']}. Without the offset, machine B would have "
          f"started {args.skew * 1e3:+.0f} ms off.")  # fmt: skip
    if not args.quick:
        out = ROOT / "benchmarks" / "results" / "spread_run.json"
        out.write_text(
            json.dumps(
                {
                    "when": datetime.now(UTC).isoformat(timespec="minutes"),
                    "machine": f"{platform.node()} {platform.machine()} "
                    f"Python {platform.python_version()}",
                    "skew_s": args.skew,
                    "params": params,
                    "runs": results,
                    "one_machine": single,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
