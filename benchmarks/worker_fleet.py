"""How quickly does a queued job start, and how many jobs a second does the fleet run?

A redis-server of its own on loopback with a Redis user per machine (as in production: each
worker connects as itself), PostgreSQL in a schema of its own, the ingest and 1 or 4 student
workers as real `felab worker` processes, a scripted streaming server.
Each job is the smallest real benchmark (`quick` with 1 request of 1 token), so the figures are
the fleet's own overhead, not a model's.

- enqueue to start: the job message's send time to the task starting on the worker (the
  worker logs it; one machine, one clock);
- result visible: the worker handing its result to the broker to the outbox row the bot reads
  being committed and seen (polled every 5 ms);
- jobs per second: N jobs queued at once, first send to last outbox row.

    .venv/bin/python benchmarks/worker_fleet.py [--jobs 40]
Writes benchmarks/results/worker_fleet.json and prints a Markdown table for the README.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import uuid
from datetime import date
from datetime import time as dtime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import select  # noqa: E402

from felab_core.db import models as m  # noqa: E402
from felab_core.db.session import session_scope  # noqa: E402
from felab_core.jobs.queueing import queue_bench_job  # noqa: E402
from felab_core.lab.scripted_server import Script, ScriptedServer  # noqa: E402
from felab_core.people.members import add_member, create_cohort  # noqa: E402
from felab_worker.dispatch import Dispatcher  # noqa: E402
from tests.e2e.fleet import fleet_fixture, wait_for  # noqa: E402

START = re.compile(r"job (\d+) started ([\d.]+) ms after it was sent")
REPORTED = re.compile(r"job (\d+) reported at ([\d.]+)")


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def run(workers: int, jobs: int) -> dict[str, Any]:
    srv = ScriptedServer(Script(persona="mlx", ttft_s=0.001, itl_s=0.001)).start_in_thread()
    gen = fleet_fixture(Path(tempfile.mkdtemp(prefix="felab-bench-")))
    fleet = next(gen)
    try:
        with session_scope(fleet.sessions) as s:
            cohort = create_cohort(
                s,
                "Bench",
                timezone="UTC",
                start_date=date(2026, 3, 2),
                post_time=dtime(9, 0),
                guild_id=f"g{uuid.uuid4().hex[:8]}",
                channel_id="c",
            )
            members = [add_member(s, cohort, str(i)) for i in range(workers)]
        fleet.start_ingest()
        ids = []
        for i, member in enumerate(members):
            env_i = fleet.student_env(f"w{i}", {"mlx": f"http://127.0.0.1:{srv.port}"})
            ids.append(fleet.pair(member, f"w{i}", env_i))
            fleet.start_student(f"w{i}", env_i)
        wait_for(lambda: all(fleet.job_worker_online(w) for w in ids), 60, "workers online")
        settings = fleet.settings(job_max_per_hour=10_000)
        dispatcher = Dispatcher(settings)
        params = {"requests": 1, "max_tokens": 1}

        def queue(k: int) -> int:
            with session_scope(fleet.sessions) as s:
                w = s.get(m.Worker, ids[k % workers])
                assert w is not None
                member = s.get(m.Member, w.member_id)
                assert member is not None
                q = queue_bench_job(
                    s,
                    member,
                    w,
                    "mlx",
                    "quick",
                    params=params,
                    send=dispatcher.send,
                    settings=settings,
                )
                return q.job.id

        # Latency: one job at a time, so nothing waits behind another.
        seen: dict[int, float] = {}
        for k in range(max(10, jobs // 2)):
            job_id = queue(k)
            wait_for(lambda j=job_id: _visible(fleet, j, seen), 30, "the job", every=0.005)
        # Throughput: all at once.
        t0 = time.time()
        batch = [queue(k) for k in range(jobs)]
        for job_id in batch:
            wait_for(lambda j=job_id: _visible(fleet, j, seen), 120, "the batch", every=0.005)
        elapsed = max(seen[j] for j in batch) - t0
        logs = "".join(p.text() for p in fleet.procs)
        starts = {int(a): float(b) for a, b in START.findall(logs)}
        reported = {int(a): float(b) for a, b in REPORTED.findall(logs)}
        single = [j for j in seen if j not in batch]
        lat = [starts[j] for j in single if j in starts]
        vis = [(seen[j] - reported[j]) * 1000 for j in single if j in reported]
        with session_scope(fleet.sessions) as s:
            done = s.scalars(select(m.BenchJob.status)).all()
        return {
            "workers": workers,
            "jobs": jobs,
            "all_done": all(st == "done" for st in done),
            "start_ms_p50": statistics.median(lat),
            "start_ms_p95": pct(lat, 0.95),
            "visible_ms_p50": statistics.median(vis),
            "visible_ms_p95": pct(vis, 0.95),
            "jobs_per_s": jobs / elapsed,
        }
    finally:
        srv.stop_thread()
        gen.close()


def _visible(fleet: Any, job_id: int, seen: dict[int, float]) -> bool:
    with session_scope(fleet.sessions) as s:
        row = s.scalar(select(m.JobOutbox.id).where(m.JobOutbox.job_id == job_id))
    if row is not None:
        seen.setdefault(job_id, time.time())
    return row is not None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--quick", action="store_true", help="1 worker, 4 jobs: does it run?")
    args = ap.parse_args()
    rows = [run(1, 4)] if args.quick else [run(n, args.jobs) for n in (1, 4)]
    if not args.quick:  # a smoke run's figures are not the ones the docs quote
        out = ROOT / "benchmarks" / "results" / "worker_fleet.json"
        out.write_text(json.dumps(rows, indent=1) + "\n")
    print("| workers | enqueue to start p50 / p95 | result visible p50 / p95 | jobs/s |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['workers']} | {r['start_ms_p50']:.1f} / {r['start_ms_p95']:.1f} ms | "
            f"{r['visible_ms_p50']:.1f} / {r['visible_ms_p95']:.1f} ms | {r['jobs_per_s']:.1f} |"
        )


if __name__ == "__main__":
    main()
