"""`felab status` on one screen (and as JSON): machines by state, jobs of the last day, the
outbox, each cohort's next daily post; on SQLite and PostgreSQL through the service, and the
real command on the embedded defaults."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.db import models as m
from felab_core.db.session import default_sessions, session_scope
from felab_core.db.types import utcnow
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.queueing import queue_bench_job
from felab_core.ops.status import fleet_status
from felab_core.people.members import ensure_local_member
from felab_core.settings import Settings, get_settings
from tests.db_support import NOW

S = Settings(worker_offline_after_s=20)


def _machine(db: Session, member: m.Member, name: str, seen_ago: float | None) -> m.Worker:
    code = issue_pair_code(db, member, name, now=NOW)
    w = redeem_pair_code(db, code, Identity(0, name, new_private_key()).public_key, now=NOW)
    w.last_seen_at = None if seen_ago is None else NOW - timedelta(seconds=seen_ago)
    return w


def test_machines_jobs_outbox_and_next_post(db: Session, student: m.Member) -> None:
    online = _machine(db, student, "online", 5)
    _machine(db, student, "asleep", 600)
    _machine(db, student, "gone", 7200)
    _machine(db, student, "new", None)
    busy = _machine(db, student, "busy", 1)
    job = queue_bench_job(db, student, busy, "mlx", now=NOW, settings=S).job
    busy.running_job_id = job.id
    queue_bench_job(db, student, online, "mlx", now=NOW, settings=S)
    db.add(m.JobOutbox(job_id=job.id, created_at=NOW, dead_at=NOW))
    db.flush()
    status = fleet_status(db, NOW, S)
    states = {mc.name: mc.state for mc in status.machines}
    assert states == {"online": "online", "asleep": "stale", "gone": "offline",
                      "new": "never seen", "busy": "busy"}  # fmt: skip
    assert {mc.name: mc.queued_jobs for mc in status.machines}["online"] == 1
    assert status.jobs_last_day == {"queued": 2}
    assert (status.outbox_pending, status.outbox_dead) == (0, 1)
    [(cohort_id, cohort, when)] = status.next_posts
    assert (cohort_id, cohort) == (student.cohort_id, student.cohort.name)
    assert when.startswith("2026-03-04T09:00")  # tomorrow


def test_the_command_on_embedded_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("FELAB_DATABASE_URL", "FELAB_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FELAB_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    try:
        with session_scope(default_sessions()) as s:
            me = ensure_local_member(s, now=utcnow())
            code = issue_pair_code(s, me, "laptop")
            redeem_pair_code(s, code, Identity(0, "x", new_private_key()).public_key)
        out = CliRunner().invoke(app, ["status", "--json"])
        assert out.exit_code == 0, out.output
        data = json.loads(out.output)
        assert [mc["name"] for mc in data["machines"]] == ["laptop"]
        assert data["machines"][0]["state"] == "never seen" and data["machines"][0]["depth"] is None
        out = CliRunner().invoke(app, ["status"], env={"COLUMNS": "200"})
        assert out.exit_code == 0 and "laptop" in out.output and "outbox: 0 waiting" in out.output
    finally:
        get_settings.cache_clear()
