"""The reconciler's limits (felab_core.jobs.reconciler): capped resends, a machine busy by its
own word, and no machine called lost while the ingest is not hearing them."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.jobs.ingest import ingest_event
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.jobs.messages import event
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.queueing import queue_bench_job
from felab_core.jobs.reconciler import reconcile
from felab_core.settings import Settings
from tests.db_support import NOW

S = Settings(job_resend_after_s=10, worker_offline_after_s=20, job_max_resends=2)


def _machine(db: Session, member: m.Member) -> tuple[Identity, m.Worker]:
    key = new_private_key()
    w = redeem_pair_code(
        db, issue_pair_code(db, member, "mac", now=NOW), Identity(0, "mac", key).public_key, now=NOW
    )
    return Identity(w.id, "mac", key), w


def test_resends_are_capped_then_the_job_fails_saying_why(db: Session, student: m.Member) -> None:
    _, w = _machine(db, student)
    job = queue_bench_job(db, student, w, "mlx", now=NOW, settings=S).job
    t = NOW
    sent = 0
    for _ in range(6):
        t += timedelta(seconds=11)
        w.last_seen_at = t  # online and idle: it simply never takes the job
        sent += len(reconcile(db, now=t, settings=S).resend)
    assert sent == 2 and job.resends == 2 and job.attempts == 1
    assert job.status == "failed" and "never started it" in (job.error or "")


def test_a_machine_that_says_it_is_busy_gets_no_resend(db: Session, student: m.Member) -> None:
    ident, w = _machine(db, student)
    busy = queue_bench_job(db, student, w, "mlx", now=NOW, settings=S).job
    waiting = queue_bench_job(db, student, w, "mlx", now=NOW, settings=S).job
    # The machine still runs `busy` (say it was cancelled here but is stopping there).
    beat = event(
        ident.worker_id, "heartbeat", at=NOW.timestamp(), body={"seq": 1, "running": busy.id}
    )
    assert ingest_event(db, ident.sign(beat), now=NOW + timedelta(seconds=15)).accepted
    assert w.running_job_id == busy.id
    out = reconcile(db, now=NOW + timedelta(seconds=16), settings=S)
    assert out.resend == [] and waiting.resends == 0


def test_nobody_is_lost_while_the_ingest_is_not_hearing_them(
    db: Session, student: m.Member
) -> None:
    ident, w = _machine(db, student)
    job = queue_bench_job(db, student, w, "mlx", now=NOW, settings=S).job
    started = event(
        ident.worker_id, "started", at=NOW.timestamp(), job_id=job.id, attempt=job.attempt
    )
    assert ingest_event(db, ident.sign(started), now=NOW).accepted
    later = NOW + timedelta(seconds=60)  # silent for a minute...
    out = reconcile(db, now=later, settings=S, heard_for_s=5)  # ...but the ingest just came back
    assert out.requeued == out.failed == [] and job.status == "running"
    out = reconcile(db, now=later, settings=S, heard_for_s=300)
    assert out.requeued == [job.id] and job.status == "queued"
