"""Asking for a job, cancelling it, and listing a member's jobs: what /bench and the CLI call."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.engine.server_kinds import ServerKind
from felab_core.engine.workloads import Workload
from felab_core.errors import Forbidden, Invalid, NotFound
from felab_core.jobs.fleet import NAME, ago, check_target, is_online, may_use, worker_targets
from felab_core.jobs.lifecycle import TERMINAL, Send, finish, new_attempt, send_after_commit
from felab_core.jobs.messages import JobMessage
from felab_core.jobs.workload import Limits, job_workload
from felab_core.settings import Settings, get_settings


@dataclass
class QueuedJob:
    job: m.BenchJob
    message: JobMessage
    notice: str = ""  # e.g. the worker is offline: said at once, not after the expiry


def job_shape(target: str, preset: str, params: dict[str, int], s: Settings) -> Workload:
    """What a job asks for, checked before anything is looked up: a target name (never a URL)
    and a workload within the limits (so a bad option is said before "no paired machine")."""
    if "://" in target or "/" in target or not NAME.match(target):
        raise Invalid(
            f"{target!r} is not a target name: name a server from the worker's targets file "
            "(such as mlx or llamacpp); addresses are set only in that file, on the machine"
        )
    return job_workload(preset, params, Limits.from_settings(s))


def check_job(
    session: Session,
    member: m.Member,
    worker: m.Worker,
    target: str,
    preset: str,
    params: dict[str, int],
    s: Settings,
    now: datetime,
) -> Workload:
    """Everything a job must pass before it is queued: a target name (never a URL), a machine
    the member may use, a workload within the limits, the member's hourly allowance."""
    workload = job_shape(target, preset, params, s)
    owner = session.get(m.Member, worker.member_id)
    if owner is None or not may_use(member, worker, owner):
        raise Forbidden(
            f"worker {worker.name!r} is not yours: its owner can allow instructors on it, "
            "nobody else can use it"
        )
    if not worker.public_key or worker.status != "paired":
        raise Invalid(f"worker {worker.name!r} is not paired: pair it with `felab worker pair`")
    check_target(worker, target, member)
    hour_ago = now - timedelta(hours=1)
    recent = session.scalar(
        select(func.count(m.BenchJob.id)).where(
            m.BenchJob.requested_by_id == member.id,
            m.BenchJob.created_at > hour_ago,
            m.BenchJob.spread_of.is_(None),  # a spread run counts once, not once a slice
        )
    )
    if (recent or 0) >= s.job_max_per_hour:
        raise Forbidden(
            f"you have asked for {recent} jobs in the last hour, the most allowed "
            f"({s.job_max_per_hour}); try again later"
        )
    return workload


def server_for(target: str, reported: dict[str, str] | None = None) -> str:
    """The server kind a job expects of its target: the kind its machine reported for that
    name (`reported`, its targets file's), else a kind's own name (mlx), else any
    OpenAI-compatible server. A target 'llama' its machine called llamacpp had been 'openai',
    and a row of any kind was then stored for it (sweep 20, b, B8)."""
    if reported and target in reported:
        return reported[target]
    kind = target.lower()
    return kind if kind in {k.value for k in ServerKind} else ServerKind.OPENAI.value


def queue_bench_job(
    session: Session,
    member: m.Member,
    worker: m.Worker,
    target: str,
    preset: str = "day2",
    *,
    params: dict[str, int] | None = None,
    send: Send | None = None,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> QueuedJob:
    """Queue a benchmark of `target` (a name in the worker's own targets file) on `worker`.

    The one call the bot's /bench and the CLI make. A URL is refused: the worker measures only
    the servers its owner wrote down, so chat cannot aim it at anything else. With `send`, the
    message goes out when the session commits.
    """
    s = settings or get_settings()
    now = now or utcnow()
    params = dict(params or {})
    check_job(session, member, worker, target, preset, params, s, now)
    server = server_for(target, worker_targets(worker))
    job = m.BenchJob(
        member_id=worker.member_id,
        requested_by_id=member.id,
        worker_id=worker.id,
        server=server,
        target=target,
        preset=preset,
        params=params,
        status="queued",
        created_at=now,
        expires_at=now + timedelta(seconds=s.job_queue_expire_s),
    )
    session.add(job)
    session.flush()
    message = new_attempt(job, now)
    session.flush()
    notice = ""
    if not is_online(worker, now, s):
        seen = ago(worker.last_seen_at, now) if worker.last_seen_at else "never"
        notice = (
            f"{worker.name} is offline (last seen {seen}): the job waits "
            f"{int(s.job_queue_expire_s // 60)} min for `felab worker start` there, then expires"
        )
    if send is not None:
        send_after_commit(session, send, [message])
    return QueuedJob(job, message, notice)


def get_job(session: Session, job_id: int) -> m.BenchJob:
    job = session.get(m.BenchJob, job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    return job


def cancel_job(
    session: Session, member: m.Member, job_id: int, *, now: datetime | None = None
) -> m.BenchJob:
    """Cancel a queued or running job.

    A running job is not stopped on the machine (nothing reaches into a student's worker): the
    run goes on to its end and its later events (progress, result, failure) are dropped, so
    nothing is recorded or posted for it. A queued job's message is dropped by the worker when
    the caller also withdraws its attempt (the dispatcher's `withdraw`).
    """
    job = get_job(session, job_id)
    if job.requested_by_id != member.id and job.member_id != member.id:
        raise Forbidden("only who asked for the job, or the machine's owner, can cancel it")
    if job.status in TERMINAL:
        raise Invalid(f"job {job.id} is already {job.status}")
    if job.spread_of is not None:
        raise Invalid(f"job {job.id} is a slice of job {job.spread_of}: cancel that one")
    when = now or utcnow()
    finish(session, job, "cancelled", when, error="cancelled on request")
    for part in slices_of(session, job):
        if part.status not in TERMINAL:
            finish(session, part, "cancelled", when, error="its run was cancelled")
    return job


def deliveries(session: Session, job: m.BenchJob) -> list[tuple[int, int | None]]:
    """(job, machine) pairs whose messages a cancel of `job` withdraws: its own, or its
    slices' for a spread run."""
    parts = slices_of(session, job)
    return [(p.id, p.worker_id) for p in parts] if parts else [(job.id, job.worker_id)]


def slices_of(session: Session, job: m.BenchJob) -> list[m.BenchJob]:
    """The jobs a spread run was cut into, in slice order (none for a one-machine job)."""
    if job.shards <= 1 or job.spread_of is not None:
        return []
    return list(
        session.scalars(
            select(m.BenchJob)
            .where(m.BenchJob.spread_of == job.id)
            .order_by(m.BenchJob.shard_index)
        )
    )


@dataclass(frozen=True)
class JobView:
    job: m.BenchJob
    worker: str  # the machine's name, "-" for a terminal `felab bench` run
    progress: str  # "2/3", or "-" before the first report


def list_jobs(session: Session, member: m.Member, *, limit: int = 20) -> list[JobView]:
    """A member's jobs, newest first: those on their machines and those they asked for.

    A run spread over several machines is one line: its machines in `worker`, the slices'
    requests added up in `progress` (the slices are parts of it, not jobs of their own)."""
    rows = session.execute(
        select(m.BenchJob, m.Worker.name)
        .outerjoin(m.Worker, m.BenchJob.worker_id == m.Worker.id)
        .where((m.BenchJob.member_id == member.id) | (m.BenchJob.requested_by_id == member.id))
        .where(m.BenchJob.spread_of.is_(None))
        .order_by(m.BenchJob.id.desc())
        .limit(limit)
    ).all()
    parents = [job.id for job, _ in rows if job.shards > 1]
    slices: dict[int, list[tuple[m.BenchJob, str | None]]] = {}
    if parents:
        for part, name in session.execute(
            select(m.BenchJob, m.Worker.name)
            .outerjoin(m.Worker, m.BenchJob.worker_id == m.Worker.id)
            .where(m.BenchJob.spread_of.in_(parents))
            .order_by(m.BenchJob.shard_index)
        ).all():
            slices.setdefault(part.spread_of or 0, []).append((part, name))
    out = []
    for job, worker in rows:
        done, total = job.progress_done, job.progress_total
        parts = slices.get(job.id)
        if parts:
            worker = "spread: " + ", ".join(name or "?" for _, name in parts)
            done = sum(p.progress_done or 0 for p, _ in parts)
            total = sum(p.progress_total or 0 for p, _ in parts)
        progress = f"{done}/{total}" if total else "-"
        out.append(JobView(job, worker or "-", progress))
    return out
