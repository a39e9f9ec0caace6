"""Can one ingest run a fleet of 1,000 machines? Routing a job and hearing heartbeats, timed.

A redis-server of its own with a Redis user per machine (made by `felab broker setup`, as in
production), PostgreSQL in a schema of its own, the real `felab worker ingest` process. The
machines are simulated in this process (asyncio, one Redis connection each, logged in as that
machine's own user): each sends a signed, numbered heartbeat every FELAB_WORKER_HEARTBEAT_S
(5 s, felab's default) and, when a job reaches its queue, answers `started` and a small
`result`, as `felab worker start` would, minus the measuring.

- heard: how long the oldest event waits unread in the ingest's inbox (sampled every 0.25 s
  while the whole fleet heartbeats), and whether every machine is known as online;
- routed: a job queued (the row committed, the message sent) to the machine popping it;
- result visible: the machine's `result` sent to the job's outbox row;
- ingest CPU: the ingest process's user+system CPU seconds per wall second, while the fleet
  heartbeats, and per 1,000 machines.

    .venv/bin/python benchmarks/fleet_scale.py [--machines 1000] [--jobs 100] [--quick]
Writes benchmarks/results/fleet_scale.json and prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import random
import statistics
import subprocess
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
from felab_core.jobs.keys import Identity, new_private_key  # noqa: E402
from felab_core.jobs.messages import event  # noqa: E402
from felab_core.jobs.pairing import (  # noqa: E402
    issue_pair_code,
    new_broker_secret,
    redeem_pair_code,
)
from felab_core.jobs.queueing import queue_bench_job  # noqa: E402
from felab_core.people.members import add_member, create_cohort  # noqa: E402
from felab_worker.dispatch import Dispatcher  # noqa: E402
from felab_worker.names import INGEST_QUEUE, Names  # noqa: E402
from tests.e2e.fleet import FELAB, PREFIX, Fleet, fleet_fixture  # noqa: E402

NAMES = Names(PREFIX)
ROW = {"server": "mlx", "model": "tiny", "preset": "quick", "concurrency": "1", "ok": "1",
       "failed": "0", "writing_tps_p50": "40.0", "ttft_p50_s": "0.01"}  # fmt: skip


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def celery_message(task: str, payload: dict[str, Any], queue: str) -> str:
    """A task message as kombu's Redis transport lays it out: what `felab worker start` sends."""
    body = json.dumps([[payload], {}, {"callbacks": None, "errbacks": None, "chain": None}])
    return json.dumps(
        {
            "body": base64.b64encode(body.encode()).decode(),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {"lang": "py", "task": task, "id": uuid.uuid4().hex, "retries": 0},
            "properties": {
                "correlation_id": uuid.uuid4().hex, "delivery_mode": 2, "priority": 0,
                "body_encoding": "base64", "delivery_tag": uuid.uuid4().hex,
                "delivery_info": {"exchange": "", "routing_key": queue},
            },
        }
    )  # fmt: skip


class Machine:
    def __init__(self, ident: Identity, url: str) -> None:
        self.ident = ident
        self.url = url
        self.seq = 0
        self.routed: list[float] = []  # seconds from send to pop
        self.sent_result: dict[int, float] = {}

    async def run(self, heartbeat_s: float, stop: asyncio.Event) -> None:
        import redis.asyncio as aioredis

        beat_conn = aioredis.Redis.from_url(self.url, decode_responses=True)
        pop_conn = aioredis.Redis.from_url(self.url, decode_responses=True)
        inbox = NAMES.key(INGEST_QUEUE)
        queue = NAMES.key(NAMES.jobs_queue(self.ident.worker_id))

        async def send(payload: dict[str, Any]) -> None:
            msg = celery_message("felab.ingest", self.ident.sign(payload), INGEST_QUEUE)
            await beat_conn.lpush(inbox, msg)

        async def beats() -> None:
            await asyncio.sleep(random.random() * heartbeat_s)  # spread, as real machines are
            while not stop.is_set():
                self.seq += 1
                await send(event(self.ident.worker_id, "heartbeat", body={"seq": self.seq}))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), heartbeat_s)

        async def jobs() -> None:
            while not stop.is_set():
                got = await pop_conn.brpop([queue], timeout=1)
                if got is None:
                    continue
                message = json.loads(got[1])
                payload = json.loads(base64.b64decode(message["body"]))[0][0]
                self.routed.append(time.time() - float(payload["sent_at"]))
                job_id, attempt = int(payload["job_id"]), str(payload["attempt"])
                wid = self.ident.worker_id
                await send(event(wid, "started", job_id=job_id, attempt=attempt))
                requests = [{"index": 0, "ok": True, "writing_tps": 40.0}]
                body = {
                    "rows": [ROW],
                    "record": {"runs": [{"concurrency": 1, "requests": requests}]},
                }
                self.sent_result[job_id] = time.time()
                await send(event(wid, "result", job_id=job_id, attempt=attempt, body=body))

        try:
            await asyncio.gather(beats(), jobs())
        finally:
            await beat_conn.aclose()
            await pop_conn.aclose()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def setup_fleet(fleet: Fleet, n: int) -> tuple[list[Identity], list[int]]:
    """n members, each with a paired machine and its own broker password."""
    idents, members = [], []
    passwords: dict[int, str] = {}
    with session_scope(fleet.sessions) as s:
        cohort = create_cohort(
            s, "Scale", timezone="UTC", start_date=date(2026, 3, 2), post_time=dtime(9, 0),
            guild_id=f"g{uuid.uuid4().hex[:8]}", channel_id="c",
        )  # fmt: skip
        for i in range(n):
            member = add_member(s, cohort, str(100_000 + i))
            key = new_private_key()
            code = issue_pair_code(s, member, f"m{i}")
            w = redeem_pair_code(s, code, Identity(0, "x", key).public_key)
            passwords[w.id] = new_broker_secret(s, w)
            idents.append(Identity(w.id, f"m{i}", key))
            members.append(member.id)
    # The broker's users, as an instructor makes them.
    out = subprocess.run(
        [FELAB, "broker", "setup", "--json"], env=fleet.ingest_env(), capture_output=True,
        text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    scheme = fleet.redis.scheme
    urls = {
        wid: f"{scheme}://{NAMES.machine_user(wid)}:{pw}@127.0.0.1:{fleet.redis.port}/0"
        for wid, pw in passwords.items()
    }
    return [
        Identity(i.worker_id, i.name, i.private_key, urls[i.worker_id]) for i in idents
    ], members


async def drive(
    fleet: Fleet, machines: list[Machine], jobs: int, heartbeat_s: float, settle_s: float
) -> dict[str, Any]:
    stop = asyncio.Event()
    tasks = [asyncio.create_task(m.run(heartbeat_s, stop)) for m in machines]
    ingest = fleet.ingest
    assert ingest is not None
    # Let every machine be heard once, then watch the ingest over a window: its CPU, and how
    # long the oldest unread event has waited in its inbox (how late it hears the fleet).
    await asyncio.sleep(heartbeat_s * 2)
    probe = Dispatcher(fleet.settings())
    waits: list[float] = []
    c0, t0 = cpu_seconds(ingest.popen.pid), time.monotonic()
    while time.monotonic() - t0 < settle_s:
        waits.append(probe.oldest_unread_s())
        await asyncio.sleep(0.25)
    cpu = (cpu_seconds(ingest.popen.pid) - c0) / (time.monotonic() - t0)
    # Heard: how stale the database's view of each machine is, right now.
    with session_scope(fleet.sessions) as s:
        seen = dict(s.execute(select(m.Worker.id, m.Worker.last_seen_at)).all())
    now = time.time()
    staleness = [now - seen[mc.ident.worker_id].timestamp() for mc in machines
                 if seen.get(mc.ident.worker_id)]  # fmt: skip
    # Routing: jobs queued one by one to random machines, each answered by its machine.
    settings = fleet.settings(job_max_per_hour=1_000_000)
    dispatcher = Dispatcher(settings)
    visible: list[float] = []
    by_id = {mc.ident.worker_id: mc for mc in machines}
    for _ in range(jobs):
        target = random.choice(machines)
        with session_scope(fleet.sessions) as s:
            worker = s.get(m.Worker, target.ident.worker_id)
            assert worker is not None
            member = s.get(m.Member, worker.member_id)
            assert member is not None
            job_id = queue_bench_job(
                s, member, worker, "mlx", "quick", send=dispatcher.send, settings=settings
            ).job.id
        t_end = time.monotonic() + 30
        while time.monotonic() < t_end:
            with session_scope(fleet.sessions) as s:
                row = s.scalar(select(m.JobOutbox.id).where(m.JobOutbox.job_id == job_id))
            if row is not None and job_id in by_id[target.ident.worker_id].sent_result:
                visible.append(time.time() - by_id[target.ident.worker_id].sent_result[job_id])
                break
            await asyncio.sleep(0.005)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    routed = [r for mc in machines for r in mc.routed]
    return {
        "machines": len(machines),
        "jobs": jobs,
        "heartbeat_s": heartbeat_s,
        "inbox_wait_s_p50": statistics.median(waits),
        "inbox_wait_s_max": max(waits),
        "machines_heard": len(staleness),
        "heard_within_s_max": max(staleness),
        "routed_ms_p50": statistics.median(routed) * 1000,
        "routed_ms_p95": pct(routed, 0.95) * 1000,
        "result_visible_ms_p50": statistics.median(visible) * 1000,
        "result_visible_ms_p95": pct(visible, 0.95) * 1000,
        "ingest_cpu_per_s": cpu,
        "ingest_cpu_per_s_per_1000": cpu * 1000 / len(machines),
    }


def run(n: int, jobs: int, heartbeat_s: float, settle_s: float) -> dict[str, Any]:
    gen = fleet_fixture(Path(tempfile.mkdtemp(prefix="felab-scale-")))
    fleet = next(gen)
    try:
        fleet.start_ingest(FELAB_WORKER_HEARTBEAT_S=str(heartbeat_s),
                           FELAB_WORKER_OFFLINE_AFTER_S=str(heartbeat_s * 4),
                           FELAB_RECONCILE_EVERY_S="5", FELAB_LOG_LEVEL="WARNING")  # fmt: skip
        idents, _ = setup_fleet(fleet, n)
        machines = [Machine(i, i.broker_url or "") for i in idents]
        result = asyncio.run(drive(fleet, machines, jobs, heartbeat_s, settle_s))
        denied = fleet.redis.denied()
        result["acl_refusals"] = len(denied)
        return result
    finally:
        gen.close()


def main() -> None:
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # two connections per machine
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machines", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="20 machines, 5 jobs: does it run?")
    args = ap.parse_args()
    if args.quick:
        result = run(20, 5, heartbeat_s=1.0, settle_s=2.0)
        print(json.dumps(result, indent=1))
        return
    result = run(args.machines, args.jobs, heartbeat_s=5.0, settle_s=20.0)
    out = ROOT / "benchmarks" / "results" / "fleet_scale.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    r = result
    print("| machines | inbox wait p50 / max | job routed p50 / p95 | result visible p50 / p95 "
          "| ingest CPU |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|")
    print(
        f"| {r['machines']:,} | {r['inbox_wait_s_p50'] * 1000:.0f} / "
        f"{r['inbox_wait_s_max'] * 1000:.0f} ms | {r['routed_ms_p50']:.1f} / "
        f"{r['routed_ms_p95']:.1f} ms | "
        f"{r['result_visible_ms_p50']:.1f} / {r['result_visible_ms_p95']:.1f} ms | "
        f"{r['ingest_cpu_per_s']:.2f} s/s ({r['ingest_cpu_per_s_per_1000']:.2f} per 1,000) |"
    )


if __name__ == "__main__":
    main()
