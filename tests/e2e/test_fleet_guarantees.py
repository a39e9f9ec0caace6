"""What the fleet promises an honest member, timed on real processes: a result the ingest
refuses fails the job with the reason within seconds; an ingest killed while it writes a result
loses nothing and doubles nothing; a cancel stops the run on the machine within 5 s; a result too
big to send says so."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from datetime import date
from datetime import time as dtime

import pytest
from sqlalchemy import select, text

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.jobs.queueing import cancel_job, queue_bench_job
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.people.members import add_member, create_cohort
from felab_worker.dispatch import Dispatcher
from tests.e2e.fleet import Fleet, fleet_fixture, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    yield from fleet_fixture(tmp_path_factory.mktemp("promises"))


@pytest.fixture(scope="module")
def member(fleet: Fleet) -> m.Member:
    with session_scope(fleet.sessions) as s:
        c = create_cohort(
            s, "P", timezone="UTC", start_date=date(2026, 3, 2), post_time=dtime(9, 0),
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


def _machine(fleet: Fleet, member: m.Member, name: str, url: str, **env: str) -> int:
    student = fleet.student_env(name, {"mlx": url}) | env
    wid = fleet.pair(member, name, student)
    fleet.start_student(name, student)
    wait_for(lambda: fleet.job_worker_online(wid), 30, f"{name} online")
    return wid


def test_refused_and_oversized_results_fail_the_job_with_the_reason(
    fleet: Fleet, member: m.Member
) -> None:
    srv = ScriptedServer(Script(persona="mlx", ttft_s=0.001, itl_s=0.001)).start_in_thread()
    try:
        # The ingest accepts 10 kB; one machine sends up to 1 MB, the other checks 10 kB itself.
        fleet.start_ingest(FELAB_RESULT_MAX_BYTES="10000")
        url = f"http://127.0.0.1:{srv.port}"
        big = _machine(fleet, member, "big-sender", url)
        careful = _machine(fleet, member, "careful", url, FELAB_RESULT_MAX_BYTES="10000")
        # 80 requests: a record of ~20 kB.
        job_id = _queue(fleet, member, big, requests=80, max_tokens=2)
        job = wait_for(lambda: _ended(fleet, job_id), 60, "the refused result")
        assert job.status == "failed" and "over the 10,000-byte limit" in (job.error or "")
        # From the machine handing its result over (its own log) to the job failing: seconds.
        log = (fleet.tmp / "student-big-sender.log").read_text()
        sent = float(re.findall(rf"job {job_id} reported at ([\d.]+)", log)[-1])
        assert job.finished_at is not None
        refused_after = job.finished_at.timestamp() - sent
        print(
            f"\nmeasured: a refused result failed its job {refused_after:.2f} s after it was sent"
        )
        assert refused_after < 10
        with session_scope(fleet.sessions) as s:
            assert s.query(m.BenchResult).filter_by(job_id=job_id).count() == 0
        # The careful machine does not even send it: its own reason, same words.
        job_id = _queue(fleet, member, careful, requests=80, max_tokens=2)
        job = wait_for(lambda: _ended(fleet, job_id), 60, "the oversized result")
        assert job.status == "failed" and "FELAB_RESULT_MAX_BYTES" in (job.error or "")
        assert "ask for fewer requests" in (job.error or "")
    finally:
        srv.stop_thread()
        assert fleet.ingest is not None
        fleet.ingest.kill()


def test_an_ingest_killed_while_writing_a_result_loses_nothing(
    fleet: Fleet, member: m.Member
) -> None:
    srv = ScriptedServer(Script(persona="mlx", ttft_s=0.001, itl_s=0.02)).start_in_thread()
    try:
        ingest = fleet.start_ingest()
        wid = _machine(fleet, member, "steady", f"http://127.0.0.1:{srv.port}")
        job_id = _queue(fleet, member, wid, requests=3, max_tokens=16)
        wait_for(lambda: fleet.job(job_id).status == "running", 30, "the run to start")
        # Hold the job's row: the ingest's write of the result waits on it, mid-transaction.
        engine = fleet.sessions.kw["bind"]
        with engine.connect() as conn:
            tx = conn.begin()
            conn.execute(text("SELECT id FROM bench_jobs WHERE id = :i FOR UPDATE"), {"i": job_id})
            wait_for(
                lambda: (
                    "felab.ingest" in ingest.text().split("steady")[-1] and _waiting_on_lock(fleet)
                ),
                60,
                "the ingest to block on the result",
            )
            ingest.kill()  # kill -9 in the middle of writing the result
            tx.rollback()
        assert fleet.job(job_id).status == "running"  # nothing half-written
        fleet.start_ingest()
        job = wait_for(lambda: _ended(fleet, job_id), 90, "the result after the restart")
        assert job.status == "done", job.error
        time.sleep(3)  # another resend or a restored copy would show as a second row
        with session_scope(fleet.sessions) as s:
            assert s.query(m.BenchResult).filter_by(job_id=job_id).count() == 1
            assert s.query(m.JobOutbox).filter_by(job_id=job_id).count() == 1
            assert s.get(m.BenchJob, job_id).attempts == 1  # type: ignore[union-attr]
    finally:
        srv.stop_thread()


def _waiting_on_lock(fleet: Fleet) -> bool:
    engine = fleet.sessions.kw["bind"]
    with engine.connect() as conn:
        waiting = conn.execute(
            text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        ).scalar()
    return bool(waiting)


def test_cancel_stops_the_run_on_the_machine_within_5_s(fleet: Fleet, member: m.Member) -> None:
    # 200 requests of 64 tokens at 20 ms: over four minutes if nothing stops it.
    srv = ScriptedServer(
        Script(persona="mlx", ttft_s=0.01, itl_s=0.02, default_max_tokens=64)
    ).start_in_thread()
    try:
        if fleet.ingest is None or fleet.ingest.popen.poll() is not None:
            fleet.start_ingest()
        wid = _machine(fleet, member, "long-run", f"http://127.0.0.1:{srv.port}")
        job_id = _queue(fleet, member, wid, requests=200, max_tokens=64)
        wait_for(lambda: fleet.job(job_id).progress_done >= 1, 60, "the run to be going")
        with session_scope(fleet.sessions) as s:
            job = cancel_job(s, s.merge(member), job_id)
            worker_id = job.worker_id
        t_cancel = time.monotonic_ns()
        Dispatcher(fleet.settings()).cancel(job_id, worker_id)
        # The last byte the server sent for this run, and no stream left open.
        wait_for(lambda: srv.active_streams == 0, 10, "the streams to close")
        time.sleep(1.0)
        last_send = max(t for r in srv.log for t in r.sends_ns)
        stopped_after = (last_send - t_cancel) / 1e9
        print(f"\nmeasured: the machine's last byte came {stopped_after:.2f} s after the cancel")
        assert stopped_after < 5, f"the run went on for {stopped_after:.1f} s after the cancel"
        assert srv.active_streams == 0
        assert len(srv.log) < 200
        assert fleet.job(job_id).status == "cancelled"
        with session_scope(fleet.sessions) as s:
            assert s.query(m.JobOutbox).filter_by(job_id=job_id).count() == 1  # recorded once
            assert (
                s.scalars(select(m.BenchResult).where(m.BenchResult.job_id == job_id)).all() == []
            )
    finally:
        srv.stop_thread()


def test_a_database_away_for_seconds_is_waited_out(fleet: Fleet, member: m.Member) -> None:
    """The ingest's database goes away while a result arrives: the ingest retries with backoff
    and the result lands once when the database is back."""
    from sqlalchemy.engine import make_url

    from tests.e2e.fleet import TcpProxy

    srv = ScriptedServer(Script(persona="mlx", ttft_s=0.001, itl_s=0.05)).start_in_thread()
    proxy = TcpProxy(make_url(fleet.db_url).port or 5432)
    try:
        if fleet.ingest is not None:
            fleet.ingest.kill()
        ingest = fleet.start_ingest(FELAB_DATABASE_URL=proxy.url_for(fleet.db_url))
        wid = _machine(fleet, member, "patient", f"http://127.0.0.1:{srv.port}")
        job_id = _queue(fleet, member, wid, requests=3, max_tokens=40)  # ~6 s of measuring
        wait_for(lambda: fleet.job(job_id).progress_done >= 1, 30, "the run to be going")
        proxy.cut()
        wait_for(lambda: "OperationalError" in ingest.text(), 60, "the ingest to hit the outage")
        time.sleep(8)
        proxy.restore()
        job = wait_for(lambda: _ended(fleet, job_id), 120, "the result after the outage")
        assert job.status == "done", job.error
        assert "Retry in" in ingest.text()  # waited out with backoff, not dropped
        with session_scope(fleet.sessions) as s:
            assert s.query(m.BenchResult).filter_by(job_id=job_id).count() == 1
    finally:
        proxy.cut()
        srv.stop_thread()
        if fleet.ingest is not None:
            fleet.ingest.kill()
