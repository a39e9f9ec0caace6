"""The job state machine: every transition of a fleet job goes through these functions.

A new attempt id is made for every send; finishing a job queues its post in the outbox once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from sqlalchemy import event as sa_event
from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.session import on_commit
from felab_core.jobs.messages import JobMessage
from felab_core.ops import metrics
from felab_core.settings import Settings

TERMINAL = ("done", "failed", "cancelled", "expired")

Send = Callable[[JobMessage], None]


class Publisher(Protocol):
    """What carries jobs to workers (the broker): the bot and the CLI are handed one."""

    def send(self, msg: JobMessage) -> None: ...

    def cancel(self, job_id: int, worker_id: int | None) -> None:
        """Drop the job's queued message, and stop its run on the machine."""


def attempt_id(sent: int) -> str:
    """The id of a job's `sent`-th send: that number in 8 hex digits, then 24 random ones."""
    return f"{sent:08x}{uuid.uuid4().hex[:24]}"


def new_attempt(job: m.BenchJob, now: datetime, *, resend: bool = False) -> JobMessage:
    """A fresh attempt id for `job` and the message that carries it to the worker.

    A `resend` (the message was lost before any machine took it) is counted apart from the
    attempts (runs that started and were lost)."""
    if resend:
        job.resends += 1
    else:
        job.attempts += 1
    # its send's number first (8 hex digits), so the ingest takes only attempts it sent
    job.attempt = attempt_id(job.attempts + job.resends)
    job.sent_at = now
    assert job.worker_id is not None and job.target is not None
    return JobMessage(
        job_id=job.id,
        attempt=job.attempt,
        worker_id=job.worker_id,
        target=job.target,
        preset=job.preset,
        params=dict(job.params or {}),
        sent_at=now.timestamp(),
        shard=job.shard_index or 0,
        shards=job.shards,
        start_at=job.start_at.timestamp() if job.start_at is not None else 0.0,
    )


def send_after_commit(session: Session, send: Send, messages: list[JobMessage]) -> None:
    """Publish `messages` only once the rows naming them are committed.

    Sent earlier, a fast worker's first event could reach the ingest before the row exists; if
    the publish itself fails after the commit, the reconciler sends the job again.
    """
    if not messages:
        return

    def _after(_session: Session) -> None:
        for msg in messages:
            send(msg)

    sa_event.listen(session, "after_commit", _after, once=True)


def finish(
    session: Session, job: m.BenchJob, status: str, now: datetime, *, error: str | None = None
) -> None:
    """End `job` in a terminal state and queue its post (once) in the outbox."""
    job.status = status
    job.error = error
    job.finished_at = now
    job.attempt = None
    ran = metrics.seconds_between(job.started_at, now) if status == "done" else None
    on_commit(session, lambda: metrics.JOBS.labels(status).inc())
    if ran is not None:
        on_commit(session, lambda: metrics.RUN_SECONDS.observe(ran))
    if job.spread_of is not None:
        session.flush()  # a slice is posted as part of its run, by the run (jobs/spread.py)
        return
    if session.scalar(select(m.JobOutbox.id).where(m.JobOutbox.job_id == job.id)) is None:
        session.add(m.JobOutbox(job_id=job.id, created_at=now))
    session.flush()


def start(session: Session, job: m.BenchJob, worker: m.Worker, now: datetime) -> None:
    """Mark `job` running; an older "running" job of the same worker was lost (one at a time)."""
    others = session.scalars(
        select(m.BenchJob).where(
            m.BenchJob.worker_id == worker.id,
            m.BenchJob.status == "running",
            m.BenchJob.id != job.id,
        )
    ).all()
    for other in others:
        finish(
            session,
            other,
            "failed",
            now,
            error="the worker moved on to another job, so this run was lost",
        )
    if job.started_at is None:
        waited = metrics.seconds_between(job.created_at, now)
        if waited is not None:
            on_commit(session, lambda: metrics.QUEUE_SECONDS.observe(waited))
    job.status = "running"
    job.started_at = job.started_at or now
    session.flush()


def lose(
    session: Session, job: m.BenchJob, now: datetime, settings: Settings, why: str
) -> JobMessage | None:
    """A run that vanished: sent again while attempts remain (the message to send is returned),
    otherwise failed with `why`."""
    if job.attempts < settings.job_max_attempts:
        job.status = "queued"
        job.progress_done = 0
        job.error = f"sent again: {why}"
        message = new_attempt(job, now)
        session.flush()
        return message
    tries = "once" if job.attempts == 1 else f"{job.attempts} times"
    finish(
        session,
        job,
        "failed",
        now,
        error=f"{why}; it was tried {tries} (FELAB_JOB_MAX_ATTEMPTS), so it was given up",
    )
    return None
