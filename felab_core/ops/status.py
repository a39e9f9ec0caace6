"""The fleet at a glance, for `felab status` and felab's own metrics: machines (online, stale,
busy), jobs of the last day by status, the outbox, the next daily post of each cohort."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.content.calendar import local_date, post_due_at
from felab_core.db import models as m
from felab_core.settings import Settings, get_settings

#: A machine silent longer than the offline threshold but less than this is "stale" (asleep?).
STALE_FOR = timedelta(hours=1)


@dataclass(frozen=True)
class Machine:
    worker_id: int
    name: str
    state: str  # online | busy | stale | offline | never seen
    last_seen_s: float | None
    running_job: int | None
    queued_jobs: int
    depth: int | None = None  # messages in its broker queue (filled by the broker's side)


@dataclass(frozen=True)
class FleetStatus:
    machines: list[Machine]
    jobs_last_day: dict[str, int]
    outbox_pending: int
    outbox_dead: int
    #: (cohort id, its name, the ISO instant): the id is what --cohort takes
    next_posts: list[tuple[int, str, str]] = field(default_factory=list)
    #: Messages waiting in the ingest's inbox and how long ago the oldest was signed (as its
    #: sender says); None where the broker cannot say (embedded) or was not reached
    inbox_waiting: int | None = None
    inbox_oldest_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def fleet_status(session: Session, now: datetime, settings: Settings | None = None) -> FleetStatus:
    s = settings or get_settings()
    offline = timedelta(seconds=s.worker_offline_after_s)
    queued = dict(
        session.execute(
            select(m.BenchJob.worker_id, func.count())
            .where(m.BenchJob.status == "queued")
            .group_by(m.BenchJob.worker_id)
        ).all()
    )
    machines = []
    for w in session.scalars(
        select(m.Worker).where(m.Worker.status == "paired").order_by(m.Worker.id)
    ):
        age = None if w.last_seen_at is None else (now - w.last_seen_at).total_seconds()
        if age is None:
            state = "never seen"
        elif age <= offline.total_seconds():
            state = "busy" if w.running_job_id is not None else "online"
        elif age <= STALE_FOR.total_seconds():
            state = "stale"
        else:
            state = "offline"
        machines.append(
            Machine(w.id, w.name, state, age, w.running_job_id, int(queued.get(w.id, 0)))
        )
    by_status = dict(
        session.execute(
            select(m.BenchJob.status, func.count())
            .where(m.BenchJob.created_at >= now - timedelta(days=1))
            .group_by(m.BenchJob.status)
        ).all()
    )
    pending = session.scalar(
        select(func.count())
        .select_from(m.JobOutbox)
        .where(m.JobOutbox.posted_at.is_(None), m.JobOutbox.dead_at.is_(None))
    )
    dead = session.scalar(
        select(func.count()).select_from(m.JobOutbox).where(m.JobOutbox.dead_at.is_not(None))
    )
    posts = []
    for cohort in session.scalars(select(m.Cohort).order_by(m.Cohort.id)):
        today = local_date(now, cohort.timezone)
        due = post_due_at(cohort, today)
        if due <= now:
            due = post_due_at(cohort, today + timedelta(days=1))
        posts.append((cohort.id, cohort.name, due.isoformat()))
    return FleetStatus(
        machines,
        {str(k): int(v) for k, v in by_status.items()},
        int(pending or 0),
        int(dead or 0),
        posts,
    )


def fleet_facts(session: Session, now: datetime) -> dict[str, Any]:
    """The numbers felab's metrics need (no names): heartbeat ages and the outbox."""
    ages = {
        wid: (now - seen).total_seconds()
        for wid, seen in session.execute(
            select(m.Worker.id, m.Worker.last_seen_at).where(m.Worker.status == "paired")
        )
        if seen is not None
    }
    status = fleet_status(session, now)
    return {"age": ages, "pending": status.outbox_pending, "dead": status.outbox_dead}
