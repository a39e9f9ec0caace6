"""A run spread over two machines end to end: a real Redis with a user per machine (each may
read the broker's clock, nothing more than before), two real `celery worker` processes, one
scripted server both reach, the ingest merging the slices in PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import date, time
from pathlib import Path

import pytest
from sqlalchemy import select

from felab_core.db import models as m
from felab_core.db.session import session_scope
from felab_core.jobs.render import render_job
from felab_core.jobs.spread import queue_spread_job
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.people.members import add_member, create_cohort
from felab_worker.dispatch import Dispatcher
from tests.e2e.fleet import Fleet, fleet_fixture, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    yield from fleet_fixture(tmp_path_factory.mktemp("spread"))


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    srv = ScriptedServer(Script(persona="mlx", ttft_s=0.01, itl_s=0.002)).start_in_thread()
    yield f"http://127.0.0.1:{srv.port}"
    srv.stop_thread()


def test_two_machines_send_one_schedule_and_the_ingest_merges_them(
    fleet: Fleet, server: str, tmp_path: Path
) -> None:
    fleet.start_ingest()
    with session_scope(fleet.sessions) as s:
        cohort = create_cohort(
            s, "Spread", timezone="UTC", start_date=date(2026, 3, 2), post_time=time(9, 0),
            guild_id=f"g{uuid.uuid4().hex[:8]}", channel_id="c",
        )  # fmt: skip
        ada = add_member(s, cohort, "1", display_name="Ada")
    ids = []
    for name in ("ada-mac", "ada-box"):
        env = fleet.student_env(name, {"mlx": server})
        ids.append(fleet.pair(ada, name, env))
        fleet.start_student(name, env)
    wait_for(lambda: all(fleet.job_worker_online(w) for w in ids), 30, "both machines online")
    settings = fleet.settings(spread_lead_s=6)
    with session_scope(fleet.sessions) as s:
        workers = [s.get(m.Worker, w) for w in ids]
        queued = queue_spread_job(
            s, s.merge(ada), [w for w in workers if w is not None], "mlx", "quick",
            params={"concurrency": 4, "requests": 12, "max_tokens": 8},
            send=Dispatcher(settings).send, settings=settings,
        )  # fmt: skip
        parent_id = queued.job.id
    job = wait_for(
        lambda: (j := fleet.job(parent_id)).status in ("done", "failed") and j, 60, "the merge"
    )
    assert job.status == "done" and job.error is None, job.error
    run = (job.record or {})["runs"][0]
    assert [q["index"] for q in run["requests"]] == list(range(12))
    machines = (job.record or {})["spread"]["machines"]
    assert [x["worker"] for x in machines] == ["ada-mac", "ada-box"]
    for x in machines:  # measured against the broker's own clock: same box, well under 50 ms
        assert x["requests"] == 6 and abs(x["clock"]["offset_s"]) < 0.05, x
        assert 0 < x["clock"]["rtt_s"] < 0.05
    with session_scope(fleet.sessions) as s:
        parent = s.get(m.BenchJob, parent_id)
        assert parent is not None
        text = render_job(s, parent).text
        outbox = s.scalars(select(m.JobOutbox.job_id)).all()
    assert "spread over 2 machines (ada-mac, ada-box)" in text and ": done" in text
    assert "Clocks against the broker's: ada-mac" in text
    assert parent_id in outbox and not set(outbox) & {q.id for q in queued.slices}
    # Each machine read the broker's clock (TIME) as its own broker user: nothing was refused.
    assert fleet.redis.denied() == []
