"""A TLS-only broker (`rediss://`) with a user per machine, restarted while jobs wait and while
one runs: Redis forgets its queues and its users, the ingest recreates the users from the
database, the machine reconnects, and every job ends once, never run twice."""

from __future__ import annotations

import time as _time
import uuid
from collections.abc import Iterator
from datetime import date, time

import pytest

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.jobs.queueing import queue_bench_job
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.people.members import add_member, create_cohort
from felab_worker.dispatch import Dispatcher
from felab_worker.names import Names
from tests.e2e.fleet import PREFIX, Fleet, fleet_fixture, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    yield from fleet_fixture(tmp_path_factory.mktemp("fleet"), tls=True)


def test_plain_text_and_anonymous_users_are_not_spoken_to(fleet: Fleet) -> None:
    import redis

    port = fleet.redis.port
    with pytest.raises(redis.exceptions.AuthenticationError):
        fleet.redis.client(f"rediss://127.0.0.1:{port}/0").set("x", "1")  # default user is off
    with pytest.raises(redis.exceptions.ConnectionError):  # plain text is not spoken at all
        redis.Redis(port=port, socket_timeout=2).ping()


def _done(fleet: Fleet, job_id: int) -> m.BenchJob | None:
    job = fleet.job(job_id)
    return job if job.status in ("done", "failed", "expired", "cancelled") else None


def test_jobs_end_once_across_a_broker_restart_over_tls(fleet: Fleet) -> None:
    # 3 requests of 16 tokens at 40 ms each: a run of ~2 s, long enough to restart under it.
    srv = ScriptedServer(
        Script(persona="mlx", ttft_s=0.01, itl_s=0.04, default_max_tokens=16)
    ).start_in_thread()
    try:
        with session_scope(fleet.sessions) as s:
            cohort = create_cohort(
                s,
                "TLS",
                timezone="UTC",
                start_date=date(2026, 3, 2),
                post_time=time(9, 0),
                guild_id=f"g{uuid.uuid4().hex[:8]}",
                channel_id="c",
            )
            ada = add_member(s, cohort, "1")
        fleet.start_ingest()
        env = fleet.student_env("tls-mac", {"mlx": f"http://127.0.0.1:{srv.port}"})
        wid = fleet.pair(ada, "tls-mac", env)
        names = Names(PREFIX)
        dispatcher = Dispatcher(fleet.settings())

        def queue(n: int) -> list[int]:
            with session_scope(fleet.sessions) as s:
                worker = s.get(m.Worker, wid)
                assert worker is not None
                return [
                    queue_bench_job(
                        s, s.merge(ada), worker, "mlx", "quick", send=dispatcher.send,
                        settings=fleet.settings(),
                    ).job.id
                    for _ in range(n)
                ]  # fmt: skip

        # Two jobs wait while the machine is off; Redis restarts: both messages are gone.
        waiting = queue(2)
        queue_key = names.key(names.jobs_queue(wid))
        assert fleet.redis.client().llen(queue_key) == 2
        fleet.redis.restart()
        assert fleet.redis.client().llen(queue_key) == 0
        fleet.start_student("tls-mac", env)
        for job_id in waiting:
            job = wait_for(lambda j=job_id: _done(fleet, j), 60, f"job {job_id} after the restart")
            assert job.status == "done", job.error
            assert job.attempts == 1 and job.resends >= 1  # sent again, run once

        # One job runs; Redis restarts under it for 2 s. The run finishes while the broker is
        # away: the result waits on the machine's disk, and lands once the users are back.
        (running,) = queue(1)
        wait_for(lambda: fleet.job(running).status == "running", 30, "the job to start")
        fleet.redis.restart(down_s=2.0)
        job = wait_for(lambda: _done(fleet, running), 90, "the running job to end")
        assert job.status == "done", job.error
        assert job.attempts == 1 and job.resends == 0  # never run twice
        with session_scope(fleet.sessions) as s:
            results = s.query(m.BenchResult).filter_by(job_id=running).count()
            outbox = s.query(m.JobOutbox).filter_by(job_id=running).count()
        assert results == 1 and outbox == 1  # landed once
        _time.sleep(2)  # resends after the ack would show up as a second result
        with session_scope(fleet.sessions) as s:
            assert s.query(m.BenchResult).filter_by(job_id=running).count() == 1
        # Pairing, queueing, claims, heartbeats, results, acknowledgements: the machine's user
        # was refused nothing.
        assert fleet.redis.denied(names.machine_user(wid)) == []
    finally:
        srv.stop_thread()
