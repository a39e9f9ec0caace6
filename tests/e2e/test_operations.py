"""Operating the fleet, on real processes: JSON logs that parse and hold no password, and a
broker that goes away for a minute while one machine idles and another runs a job."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import date
from datetime import time as dtime
from urllib.parse import urlsplit

import pytest

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.jobs.queueing import queue_bench_job
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.people.members import add_member, create_cohort
from felab_worker.dispatch import Dispatcher
from tests.e2e.fleet import Fleet, fleet_fixture, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]
JSON_LOGS = {"FELAB_LOG_FORMAT": "json", "FELAB_LOG_LEVEL": "DEBUG"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    yield from fleet_fixture(tmp_path_factory.mktemp("ops"))


@pytest.fixture(scope="module")
def member(fleet: Fleet) -> m.Member:
    with session_scope(fleet.sessions) as s:
        c = create_cohort(
            s, "Ops", timezone="UTC", start_date=date(2026, 3, 2), post_time=dtime(9, 0),
            guild_id=f"g{uuid.uuid4().hex[:8]}", channel_id="c",
        )  # fmt: skip
        return add_member(s, c, "1", display_name="Ada")


def _queue(fleet: Fleet, member: m.Member, worker_id: int, **params: int) -> int:
    settings = fleet.settings(job_max_per_hour=1000)
    with session_scope(fleet.sessions) as s:
        worker = s.get(m.Worker, worker_id)
        assert worker is not None
        return queue_bench_job(
            s, s.merge(member), worker, "mlx", "quick", params=params,
            send=Dispatcher(settings).send, settings=settings,
        ).job.id  # fmt: skip


def _ended(fleet: Fleet, job_id: int) -> m.BenchJob | None:
    job = fleet.job(job_id)
    return job if job.status in ("done", "failed", "cancelled", "expired") else None


def _seen_since(fleet: Fleet, worker_id: int, t: float) -> bool:
    with session_scope(fleet.sessions) as s:
        w = s.get(m.Worker, worker_id)
        return w is not None and w.last_seen_at is not None and w.last_seen_at.timestamp() > t


def test_json_logs_parse_and_hold_no_password(fleet: Fleet, member: m.Member) -> None:
    srv = ScriptedServer(Script(persona="mlx", ttft_s=0.001, itl_s=0.001)).start_in_thread()
    try:
        ingest = fleet.start_ingest(**JSON_LOGS)
        env = fleet.student_env("logged", {"mlx": f"http://127.0.0.1:{srv.port}"}) | JSON_LOGS
        wid = fleet.pair(member, "logged", env)
        worker = fleet.start_student("logged", env)
        wait_for(lambda: fleet.job_worker_online(wid), 30, "online")
        job_id = _queue(fleet, member, wid)
        job = wait_for(lambda: _ended(fleet, job_id), 60, "the job")
        assert job.status == "done", job.error
        secrets = {
            "admin": fleet.redis.password,
            "pairing": urlsplit(fleet.pairing_url()).password,
            "machine": urlsplit(fleet.own_url("logged", env)).password,
        }
        for proc in (ingest, worker):
            lines = [line for line in proc.text().splitlines() if line.strip()]
            assert len(lines) >= 3
            for line in lines:
                record = json.loads(line)
                assert {"time", "level", "logger", "message"} <= set(record)
            for what, secret in secrets.items():
                assert secret and secret not in proc.text(), f"the {what} password is in a log"
        ingest_lines = [json.loads(x) for x in ingest.text().splitlines() if x.strip()]
        assert any(r.get("worker") == wid and r.get("job_id") for r in ingest_lines)
    finally:
        srv.stop_thread()
        for p in fleet.procs:
            p.kill()
        fleet.procs.clear()


def test_a_minute_without_the_broker(fleet: Fleet, member: m.Member) -> None:
    # ~8 s of measuring: 4 requests of 40 tokens at 50 ms.
    srv = ScriptedServer(
        Script(persona="mlx", ttft_s=0.01, itl_s=0.05, default_max_tokens=40)
    ).start_in_thread()
    try:
        fleet.start_ingest()
        url = f"http://127.0.0.1:{srv.port}"
        idle_env = fleet.student_env("idle", {"mlx": url})
        busy_env = fleet.student_env("busy", {"mlx": url})
        idle = fleet.pair(member, "idle", idle_env)
        busy = fleet.pair(member, "busy", busy_env)
        fleet.start_student("idle", idle_env)
        fleet.start_student("busy", busy_env)
        wait_for(lambda: fleet.job_worker_online(idle) and fleet.job_worker_online(busy), 30, "up")
        running = _queue(fleet, member, busy, requests=4, max_tokens=40)
        wait_for(lambda: fleet.job(running).progress_done >= 1, 30, "the run to be going")
        fleet.redis.stop()  # for a minute: queues, claims and users all gone
        time.sleep(60)
        fleet.redis.start()
        back = time.time()
        # Both machines come back by themselves (the ingest makes their users again).
        wait_for(
            lambda: _seen_since(fleet, idle, back) and _seen_since(fleet, busy, back),
            120,
            "both machines heard from again",
        )
        job = wait_for(lambda: _ended(fleet, running), 120, "the job that ran through it")
        assert job.status == "done", job.error  # measured during the outage, sent after it
        assert job.attempts == 1 and job.resends == 0  # once: never run twice
        with session_scope(fleet.sessions) as s:
            assert s.query(m.BenchResult).filter_by(job_id=running).count() == 1
        # And the idle one takes work again.
        fresh = _queue(fleet, member, idle)
        again = wait_for(lambda: _ended(fleet, fresh), 120, "a new job")
        assert again.status == "done", again.error
    finally:
        srv.stop_thread()
