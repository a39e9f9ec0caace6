"""Repairing what the broker lost, run every few seconds by the ingest.

The database row is the truth: a message Redis dropped (it keeps nothing on disk) is sent
again, a job nobody started expires, and a run whose machine went silent is sent again or
failed with the reason.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.jobs.fleet import is_online
from felab_core.jobs.lifecycle import finish, lose, new_attempt
from felab_core.jobs.messages import JobMessage
from felab_core.jobs.spread import settle
from felab_core.jobs.stored_job import stored_job_problem
from felab_core.settings import Settings, get_settings

#: Jobs a machine runs: all but the parent of a spread run, whose slices run instead.
ON_A_MACHINE = or_(m.BenchJob.shards == 1, m.BenchJob.spread_of.is_not(None))

log = logging.getLogger(__name__)


@dataclass
class Reconciled:
    resend: list[JobMessage] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    requeued: list[int] = field(default_factory=list)


def reconcile(
    session: Session,
    *,
    now: datetime | None = None,
    settings: Settings | None = None,
    heard_for_s: float | None = None,
) -> Reconciled:
    """Repair what the broker lost.

    - a queued job past its expiry: expired, with what to do;
    - a queued job its idle, online worker has not started long after it was sent: the
      message is gone (Redis keeps nothing on disk): sent again with a new attempt, at most
      FELAB_JOB_MAX_RESENDS times, then failed with the reason;
    - a running job whose worker stopped heartbeating: sent again while attempts remain,
      otherwise failed with that reason; but only once the ingest has been hearing machines
      for a while (`heard_for_s`: since the broker or the ingest last started, zero while
      events wait unread): after a restart every machine looks silent until its news is read;
    - a running job past the hard time limit (plus a minute): failed.

    A machine is busy when the database says it runs a job or its heartbeat says so (a run
    cancelled in the database may still be stopping there). Only fleet jobs (those with a
    target) are touched: a terminal `felab bench` job has no worker and nothing to reconcile.
    """
    s = settings or get_settings()
    now = now or utcnow()
    out = Reconciled()
    workers = {w.id: w for w in session.scalars(select(m.Worker))}
    busy = set(
        session.scalars(select(m.BenchJob.worker_id).where(m.BenchJob.status == "running")).all()
    )
    busy |= {
        w.id for w in workers.values() if w.running_job_id is not None and is_online(w, now, s)
    }
    deaf = heard_for_s is not None and heard_for_s < s.worker_offline_after_s * 2
    out.failed += _fail_unreadable(session, now)
    queued = session.scalars(
        select(m.BenchJob)
        .where(m.BenchJob.status == "queued", m.BenchJob.target.is_not(None), ON_A_MACHINE)
        .order_by(m.BenchJob.id)
    ).all()
    # A worker that just finished a job is about to take the next one from its queue: the
    # messages behind a long job are waiting, not lost.
    last_done = dict(
        session.execute(
            select(m.BenchJob.worker_id, func.max(m.BenchJob.finished_at))
            .where(m.BenchJob.worker_id.is_not(None))
            .group_by(m.BenchJob.worker_id)
        ).all()
    )
    resent_to: set[int] = set()
    for job in queued:
        worker = workers.get(job.worker_id) if job.worker_id is not None else None
        if (job.expires_at is not None and job.expires_at <= now) or worker is None:
            name = worker.name if worker else "its worker"
            late = (
                "it was not taken by the start the slices share (FELAB_SPREAD_LEAD_S)"
                if job.spread_of is not None
                else f"no worker started it within {int(s.job_queue_expire_s // 60)} min"
            )
            finish(
                session,
                job,
                "expired",
                now,
                error=f"{late}: is `felab worker start --name {name}` running on that machine?",
            )
            out.expired.append(job.id)
            continue
        quiet_since = max(d for d in (job.sent_at, last_done.get(worker.id)) if d is not None)
        stale = now - quiet_since >= timedelta(seconds=s.job_resend_after_s)
        if (
            stale
            and is_online(worker, now, s)
            and worker.id not in busy
            and worker.id not in resent_to
        ):
            resent_to.add(worker.id)  # one at a time: the worker runs them in order anyway
            if job.resends >= s.job_max_resends:
                finish(
                    session,
                    job,
                    "failed",
                    now,
                    error=(
                        f"sent {job.resends + 1} times to {worker.name}, which is online but "
                        "never started it: is its worker on this broker, with this felab?"
                    ),
                )
                out.failed.append(job.id)
                continue
            out.resend.append(new_attempt(job, now, resend=True))
    running = session.scalars(
        select(m.BenchJob).where(
            m.BenchJob.status == "running", m.BenchJob.target.is_not(None), ON_A_MACHINE
        )
    ).all()
    for job in running:
        worker = workers.get(job.worker_id) if job.worker_id is not None else None
        if deaf:
            continue  # the ingest has not heard from machines long enough to call one lost
        if worker is None or not is_online(worker, now, s):
            name = worker.name if worker else "the worker"
            why = (
                f"{name} stopped heartbeating while running it (machine asleep, the worker "
                "killed, or the network down)"
            )
            message = lose(session, job, now, s, why)
            if message is not None:
                out.resend.append(message)
                out.requeued.append(job.id)
            else:
                out.failed.append(job.id)
        elif job.started_at is not None and now - job.started_at > timedelta(
            seconds=s.job_time_limit_s + 60
        ):
            finish(
                session,
                job,
                "failed",
                now,
                error=f"ran past the {int(s.job_time_limit_s)} s limit: ask for fewer requests",
            )
            out.failed.append(job.id)
    # A spread run ends when its last slice does, however that slice ended (expired above,
    # lost, cancelled): merge those whose slices have all ended.
    for parent in session.scalars(
        select(m.BenchJob).where(m.BenchJob.status.in_(("queued", "running")), ~ON_A_MACHINE)
    ):
        settle(session, parent, now)
    session.flush()
    return out


def _fail_unreadable(session: Session, now: datetime) -> list[int]:
    """Fail each waiting or running fleet job whose stored preset and params felab never
    queues (a row changed by hand: params [1, 2]), with the reason, logged once (it is failed):
    it had stopped every pass of the reconciler, for every job, on a TypeError."""
    failed = []
    active = session.scalars(
        select(m.BenchJob)
        .where(m.BenchJob.status.in_(("queued", "running")), m.BenchJob.target.is_not(None))
        .order_by(m.BenchJob.id)
    ).all()
    for job in active:
        problem = stored_job_problem(job.preset, job.params)
        if problem is None:
            continue
        error = (
            f"felab cannot run this job as stored ({problem}): it was changed outside felab; "
            "queue the benchmark again"
        )
        log.warning("job %s failed: %s", job.id, error)
        finish(session, job, "failed", now, error=error)
        failed.append(job.id)
    return failed
