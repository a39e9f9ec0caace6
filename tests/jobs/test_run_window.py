"""A run's length fits in the time the server saw pass between its job's making and its
result's arrival (both on the server's clock): the 300 s clock slack is for the times a
machine writes, not for that (twenty-second sweep, b, B13: a 250 s run was taken 1 s after its
job was made)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.jobs.ingest import ingest_event
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.jobs.messages import event
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.queueing import queue_bench_job
from tests.db_support import NOW
from tests.jobs.job_result import job_body


def _send_after(db: Session, member: m.Member, lasted: float, after_s: float) -> m.BenchJob:
    key = new_private_key()
    code = issue_pair_code(db, member, "mac", now=NOW)
    w = redeem_pair_code(db, code, Identity(0, "mac", key).public_key, now=NOW)
    job = queue_bench_job(db, member, w, "mlx", "quick", now=NOW).job
    body = job_body("quick", at=NOW)
    body["record"]["runs"][0]["summary"]["duration_s"] = lasted
    arrived = NOW + timedelta(seconds=after_s)
    ev = event(w.id, "result", job_id=job.id, attempt=job.attempt, at=arrived.timestamp())
    ingest_event(db, Identity(w.id, "mac", key).sign({**ev, "body": body}), now=arrived)
    return job


def test_a_run_longer_than_the_server_saw_pass_is_refused(db: Session, student: m.Member) -> None:
    job = _send_after(db, student, lasted=250.0, after_s=1.0)
    assert job.status == "failed"
    assert "run 1 lasted 250 s" in (job.error or "") and "arrived 1 s later" in (job.error or "")


def test_a_run_that_fits_with_its_edges_is_kept(db: Session, student: m.Member) -> None:
    job = _send_after(db, student, lasted=11.5, after_s=10.0)
    assert job.status == "done", job.error
