"""Benchmark jobs on students' machines: pairing, queueing, the state machine, the ingest of
what workers report, the reconciler and the outbox, as plain functions over a session.

The database row is the truth about a job; the broker only carries it. Every function here is
what the bot, the CLI, the Celery tasks and the tests call alike; none of them knows Celery.

States: queued -> running -> done | failed; queued -> expired (no worker started it in time);
queued | running -> cancelled. A run whose worker vanished goes back to queued with a new
attempt (while attempts remain) or fails with that reason. Each send gets a fresh `attempt`
id: an event or a delivery that names another attempt is late, and is dropped.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import event as sa_event
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.errors import Forbidden, Invalid, NotFound
from felab_core.db.types import utcnow
from felab_core.engine.targets import ServerKind
from felab_core.engine.workloads import PRESETS, Workload
from felab_core.jobs.keys import load_public_key, verify
from felab_core.jobs.messages import JobMessage
from felab_core.numbers.service import record_measured
from felab_core.settings import Settings, get_settings

TERMINAL = ("done", "failed", "cancelled", "expired")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
PARAM_NAMES = ("concurrency", "requests", "max_tokens")


def _settings(settings: Settings | None) -> Settings:
    return settings or get_settings()


def _seconds(s: float) -> timedelta:
    return timedelta(seconds=s)


def _ago(when: datetime, now: datetime) -> str:
    secs = int((now - when).total_seconds())
    if secs < 90:
        return f"{secs} s ago"
    if secs < 5400:
        return f"{secs // 60} min ago"
    return f"{secs // 3600} h ago"


# ----------------------------------------------------------------------------- pairing


def _hash_code(code: str) -> str:
    return hashlib.sha256(code.strip().upper().encode()).hexdigest()


def issue_pair_code(
    session: Session,
    member: m.Member,
    worker_name: str,
    *,
    allow_instructors: bool = False,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> str:
    """A one-time code that pairs one machine as `worker_name` for `member` (`/worker pair`)."""
    if not _NAME.match(worker_name):
        raise Invalid(
            f"{worker_name!r} cannot name a worker: use letters, digits, '-', '_' or '.', "
            "such as studio-mbp"
        )
    now = now or utcnow()
    code = "-".join(secrets.token_hex(3).upper() for _ in range(3))
    session.add(
        m.PairCode(
            code_hash=_hash_code(code),
            member_id=member.id,
            worker_name=worker_name,
            allow_instructors=allow_instructors,
            created_at=now,
            expires_at=now + _seconds(_settings(settings).pair_code_ttl_s),
        )
    )
    session.flush()
    return code


def redeem_pair_code(
    session: Session,
    code: str,
    public_key: str,
    *,
    targets: Any = None,
    now: datetime | None = None,
) -> m.Worker:
    """Turn a code into a worker that holds `public_key`; a code works once, before it expires.

    Pairing a name again (a reinstalled Mac) replaces that worker's key: the old one stops being
    accepted at once. `targets` is what the machine reported of its targets file (name -> kind).
    """
    now = now or utcnow()
    public_key = load_public_key(public_key)
    row = session.scalar(
        select(m.PairCode).where(m.PairCode.code_hash == _hash_code(code)).with_for_update()
    )
    if row is None or row.used_at is not None:
        raise Forbidden("that pairing code is unknown or already used: ask the bot for a new one")
    if row.expires_at <= now:
        raise Forbidden("that pairing code has expired: ask the bot (/worker pair) for a new one")
    row.used_at = now
    worker = session.scalar(
        select(m.Worker).where(
            m.Worker.member_id == row.member_id, m.Worker.name == row.worker_name
        )
    )
    if worker is None:
        worker = m.Worker(member_id=row.member_id, name=row.worker_name, created_at=now)
        session.add(worker)
    worker.public_key = public_key
    worker.status = "paired"
    worker.allow_instructors = row.allow_instructors
    reported = clean_targets(targets)
    if reported is not None:
        worker.targets = reported
    session.flush()
    return worker


MAX_TARGETS = 64
_KINDS = frozenset(k.value for k in ServerKind)


def clean_targets(raw: Any) -> dict[str, str] | None:
    """A worker's reported targets as {name: kind}, or None when it reported none.

    Only names and kinds are kept (a worker never sends URLs, and anything else in the report
    is dropped): a name that could not name a target or an unknown kind is left out.
    """
    if not isinstance(raw, dict):
        return None
    out: dict[str, str] = {}
    for name, kind in raw.items():
        if len(out) >= MAX_TARGETS:
            break
        if isinstance(name, str) and _NAME.match(name) and str(kind) in _KINDS:
            out[name] = str(kind)
    return dict(sorted(out.items()))


def worker_targets(worker: m.Worker) -> dict[str, str] | None:
    """The targets `worker` last reported ({name: kind}); None when it never reported any."""
    return clean_targets(worker.targets)


def check_target(worker: m.Worker, target: str, member: m.Member | None = None) -> None:
    """Refuse a target the worker does not report having; a worker that never reported its
    targets (an older felab) is given any name, and its own run says whether it has it."""
    known = worker_targets(worker)
    if known is None or target in known:
        return
    whose = "your machine" if member is not None and member.id == worker.member_id else "machine"
    has = ", ".join(known) if known else "none"
    raise Invalid(
        f"{whose} {worker.name} has no target {target}; it has: {has}. Add [targets.{target}] "
        "with its url to the targets file on that machine (FELAB_TARGETS_FILE): the worker "
        "reports it at its next heartbeat"
    )


def set_allow_instructors(
    session: Session, member: m.Member, worker: m.Worker, allow: bool
) -> None:
    """The owner's consent for their instructors to run jobs on this machine."""
    if worker.member_id != member.id:
        raise Forbidden("only the machine's owner can change who may use it")
    worker.allow_instructors = allow
    session.flush()


@dataclass(frozen=True)
class WorkerView:
    worker: m.Worker
    online: bool
    last_seen: str  # for people: "12 s ago", "never"
    running_job: int | None


def is_online(worker: m.Worker, now: datetime, settings: Settings | None = None) -> bool:
    seen = worker.last_seen_at
    return seen is not None and now - seen <= _seconds(_settings(settings).worker_offline_after_s)


def list_workers(
    session: Session,
    member: m.Member,
    *,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> list[WorkerView]:
    """A member's machines, online or not, with when each was last heard from."""
    now = now or utcnow()
    workers = session.scalars(
        select(m.Worker).where(m.Worker.member_id == member.id).order_by(m.Worker.name)
    ).all()
    out = []
    for w in workers:
        running = session.scalar(
            select(m.BenchJob.id).where(
                m.BenchJob.worker_id == w.id, m.BenchJob.status == "running"
            )
        )
        seen = _ago(w.last_seen_at, now) if w.last_seen_at else "never"
        out.append(WorkerView(w, is_online(w, now, settings), seen, running))
    return out


def find_worker(session: Session, member: m.Member, name: str) -> m.Worker:
    """One of the member's machines by name (instructors: any machine in their cohort)."""
    q = (
        select(m.Worker)
        .join(m.Member, m.Worker.member_id == m.Member.id)
        .where(m.Worker.name == name)
    )
    q = q.where(m.Member.cohort_id == member.cohort_id)
    rows = session.scalars(q).all()
    own = [w for w in rows if w.member_id == member.id]
    if own:
        return own[0]
    if rows and member.role == "instructor":
        return rows[0]
    raise NotFound(f"you have no worker named {name!r}: `felab worker list` shows your machines")


# ----------------------------------------------------------------------------- queueing


@dataclass(frozen=True)
class Limits:
    """What a job may ask for (FELAB_JOB_MAX_*): a shared Mac is not a load generator."""

    concurrency: int
    requests: int
    max_tokens: int
    per_hour: int

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Limits:
        s = _settings(settings)
        return cls(s.job_max_concurrency, s.job_max_requests, s.job_max_tokens, s.job_max_per_hour)


def job_workload(preset: str, params: dict[str, int], limits: Limits) -> Workload:
    """The workload a job runs: a named preset with validated overrides, within the limits.

    Both sides call it: the server before queueing, the worker again before running (a message
    read off the broker is not trusted to have come through the server).
    """
    if preset not in PRESETS:
        raise Invalid(f"unknown preset {preset!r}: use one of {', '.join(PRESETS)}")
    unknown = set(params) - set(PARAM_NAMES)
    if unknown:
        raise Invalid(
            f"a job cannot set {', '.join(sorted(unknown))}: only {', '.join(PARAM_NAMES)}"
        )
    base = PRESETS[preset].workload
    overrides: dict[str, Any] = {}
    if "concurrency" in params:
        overrides["concurrency"] = (params["concurrency"],)
    if "requests" in params:
        overrides["requests"] = params["requests"]
    if "max_tokens" in params:
        overrides["max_tokens"] = params["max_tokens"]
    w = base.with_overrides(**overrides)
    problems = []
    if any(c < 1 or c > limits.concurrency for c in w.concurrency):
        problems.append(f"concurrency must be 1 to {limits.concurrency}")
    if w.requests is None or not 1 <= w.requests <= limits.requests:
        problems.append(f"requests must be 1 to {limits.requests}")
    if w.max_tokens is None or not 1 <= w.max_tokens <= limits.max_tokens:
        problems.append(f"max tokens must be 1 to {limits.max_tokens}")
    if problems:
        raise Invalid("this job asks too much: " + "; ".join(problems))
    try:
        w.validate()
    except ValueError as exc:
        raise Invalid(str(exc)) from None
    return w


def may_use(member: m.Member, worker: m.Worker, owner: m.Member) -> bool:
    """The owner always; an instructor of the owner's cohort only if the owner allowed it."""
    if worker.member_id == member.id:
        return True
    return (
        member.role == "instructor"
        and member.cohort_id == owner.cohort_id
        and worker.allow_instructors
    )


@dataclass
class QueuedJob:
    job: m.BenchJob
    message: JobMessage
    notice: str = ""  # e.g. the worker is offline: said at once, not after the expiry


Send = Callable[[JobMessage], None]


def _new_attempt(job: m.BenchJob, now: datetime) -> JobMessage:
    job.attempt = uuid.uuid4().hex
    job.attempts += 1
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
    s = _settings(settings)
    now = now or utcnow()
    if "://" in target or "/" in target or not _NAME.match(target):
        raise Invalid(
            f"{target!r} is not a target name: name a server from the worker's targets file "
            "(such as mlx or llamacpp); addresses are set only in that file, on the machine"
        )
    owner = session.get(m.Member, worker.member_id)
    if owner is None or not may_use(member, worker, owner):
        raise Forbidden(
            f"worker {worker.name!r} is not yours: its owner can allow instructors on it, "
            "nobody else can use it"
        )
    if not worker.public_key or worker.status != "paired":
        raise Invalid(f"worker {worker.name!r} is not paired: pair it with `felab worker pair`")
    check_target(worker, target, member)
    params = dict(params or {})
    job_workload(preset, params, Limits.from_settings(s))
    hour_ago = now - timedelta(hours=1)
    recent = session.scalar(
        select(func.count(m.BenchJob.id)).where(
            m.BenchJob.requested_by_id == member.id, m.BenchJob.created_at > hour_ago
        )
    )
    if (recent or 0) >= s.job_max_per_hour:
        raise Forbidden(
            f"you have asked for {recent} jobs in the last hour, the most allowed "
            f"({s.job_max_per_hour}); try again later"
        )
    kind = target.lower()
    server = kind if kind in {k.value for k in ServerKind} else ServerKind.OPENAI.value
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
        expires_at=now + _seconds(s.job_queue_expire_s),
    )
    session.add(job)
    session.flush()
    message = _new_attempt(job, now)
    session.flush()
    notice = ""
    if not is_online(worker, now, s):
        seen = _ago(worker.last_seen_at, now) if worker.last_seen_at else "never"
        notice = (
            f"{worker.name} is offline (last seen {seen}): the job waits "
            f"{int(s.job_queue_expire_s // 60)} min for `felab worker start` there, then expires"
        )
    if send is not None:
        send_after_commit(session, send, [message])
    return QueuedJob(job, message, notice)


def cancel_job(
    session: Session, member: m.Member, job_id: int, *, now: datetime | None = None
) -> m.BenchJob:
    """Cancel a queued or running job.

    A running job is not stopped on the machine (nothing reaches into a student's worker): the
    run goes on to its end and its later events (progress, result, failure) are dropped, so
    nothing is recorded or posted for it. A queued job's message is dropped by the worker when
    the caller also withdraws its attempt (worker.dispatch.Dispatcher.withdraw).
    """
    job = get_job(session, job_id)
    if job.requested_by_id != member.id and job.member_id != member.id:
        raise Forbidden("only who asked for the job, or the machine's owner, can cancel it")
    if job.status in TERMINAL:
        raise Invalid(f"job {job.id} is already {job.status}")
    _finish(session, job, "cancelled", now or utcnow(), error="cancelled on request")
    return job


@dataclass(frozen=True)
class JobView:
    job: m.BenchJob
    worker: str  # the machine's name, "-" for a terminal `felab bench` run
    progress: str  # "2/3", or "-" before the first report


def list_jobs(session: Session, member: m.Member, *, limit: int = 20) -> list[JobView]:
    """A member's jobs, newest first: those on their machines and those they asked for."""
    rows = session.execute(
        select(m.BenchJob, m.Worker.name)
        .outerjoin(m.Worker, m.BenchJob.worker_id == m.Worker.id)
        .where((m.BenchJob.member_id == member.id) | (m.BenchJob.requested_by_id == member.id))
        .order_by(m.BenchJob.id.desc())
        .limit(limit)
    ).all()
    out = []
    for job, worker in rows:
        total = job.progress_total
        progress = f"{job.progress_done}/{total}" if total else "-"
        out.append(JobView(job, worker or "-", progress))
    return out


def get_job(session: Session, job_id: int) -> m.BenchJob:
    job = session.get(m.BenchJob, job_id)
    if job is None:
        raise NotFound(f"no job {job_id}")
    return job


def _finish(
    session: Session, job: m.BenchJob, status: str, now: datetime, *, error: str | None = None
) -> None:
    job.status = status
    job.error = error
    job.finished_at = now
    job.attempt = None
    if session.scalar(select(m.JobOutbox.id).where(m.JobOutbox.job_id == job.id)) is None:
        session.add(m.JobOutbox(job_id=job.id, created_at=now))
    session.flush()


# ----------------------------------------------------------------------------- ingest


@dataclass
class Ingested:
    """What an event did: `accepted` False with the reason when it was dropped or refused."""

    accepted: bool
    reason: str = ""
    job: m.BenchJob | None = None
    resend: list[JobMessage] = field(default_factory=list)


def ingest_event(
    session: Session,
    payload: dict[str, Any],
    *,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> Ingested:
    """Apply one signed event from a worker. Only the trusted ingest calls this.

    Raises Forbidden for a message that no paired worker signed, or that names a job assigned
    to another worker; returns accepted=False for a late event (old attempt, finished job).
    """
    s = _settings(settings)
    now = now or utcnow()
    try:
        worker_id = int(payload["worker_id"])
        kind = str(payload["kind"])
    except (KeyError, TypeError, ValueError):
        raise Invalid("not a felab worker event") from None
    worker = session.get(m.Worker, worker_id)
    if worker is None or not worker.public_key:
        raise Forbidden(f"no paired worker {worker_id}: the event was refused")
    verify(payload, worker.public_key)
    worker.last_seen_at = now
    if kind == "heartbeat":
        body = payload.get("body")
        reported = clean_targets(body.get("targets")) if isinstance(body, dict) else None
        if reported is not None and reported != worker.targets:
            worker.targets = reported
        session.flush()
        return Ingested(True)
    job_id = payload.get("job_id")
    job = session.get(m.BenchJob, int(job_id)) if job_id is not None else None
    if job is None:
        return Ingested(False, f"no job {job_id}")
    if job.worker_id != worker.id:
        raise Forbidden(f"job {job.id} is assigned to another worker, not {worker.name!r}: refused")
    attempt = payload.get("attempt")
    if job.status in TERMINAL:
        return Ingested(False, f"job {job.id} is already {job.status}", job)
    if attempt != job.attempt:
        return Ingested(False, f"late event from an old attempt of job {job.id}", job)
    body = payload.get("body") or {}
    if not isinstance(body, dict):
        raise Invalid("the event's body is not an object")
    if kind == "started":
        return _started(session, job, worker, now)
    if kind == "progress":
        if job.status == "queued":
            _started(session, job, worker, now)
        job.progress_done = max(job.progress_done, int(body.get("done", 0)))
        total = body.get("total")
        job.progress_total = int(total) if total is not None else job.progress_total
        session.flush()
        return Ingested(True, job=job)
    if kind == "failed":
        reason = str(body.get("reason") or "the worker reported a failure without a reason")
        _finish(session, job, "failed", now, error=reason[:2000])
        return Ingested(True, job=job)
    if kind == "lost":
        return _lost(
            session,
            job,
            now,
            s,
            "the worker process running the job died (killed or out of memory)",
        )
    if kind == "result":
        _store_result(session, job, body, now)
        return Ingested(True, job=job)
    raise Invalid(f"unknown event kind {kind!r}")


def _started(session: Session, job: m.BenchJob, worker: m.Worker, now: datetime) -> Ingested:
    others = session.scalars(
        select(m.BenchJob).where(
            m.BenchJob.worker_id == worker.id,
            m.BenchJob.status == "running",
            m.BenchJob.id != job.id,
        )
    ).all()
    for other in others:  # a worker runs one job at a time: an older "running" one was lost
        _finish(
            session,
            other,
            "failed",
            now,
            error="the worker moved on to another job, so this run was lost",
        )
    job.status = "running"
    job.started_at = job.started_at or now
    session.flush()
    return Ingested(True, job=job)


def _lost(session: Session, job: m.BenchJob, now: datetime, s: Settings, why: str) -> Ingested:
    if job.attempts < s.job_max_attempts:
        job.status = "queued"
        job.progress_done = 0
        job.error = f"sent again: {why}"
        message = _new_attempt(job, now)
        session.flush()
        return Ingested(True, job=job, resend=[message])
    tries = "once" if job.attempts == 1 else f"{job.attempts} times"
    _finish(
        session,
        job,
        "failed",
        now,
        error=f"{why}; it was tried {tries} (FELAB_JOB_MAX_ATTEMPTS), so it was given up",
    )
    return Ingested(True, job=job)


def _store_result(session: Session, job: m.BenchJob, body: dict[str, Any], now: datetime) -> None:
    rows = body.get("rows")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise Invalid("a result needs at least one CSV row")
    for row in rows:
        record_measured(session, job, {str(k): str(v) for k, v in row.items()}, now=now)
    record = body.get("record")
    job.record = record if isinstance(record, dict) else None
    job.summary = str(body.get("summary") or "")[:4000]
    png = body.get("png")
    if isinstance(png, str) and png:
        try:
            job.chart_png = base64.b64decode(png, validate=True)
        except (binascii.Error, ValueError):
            raise Invalid("the result's chart is not base64") from None
    job.progress_done = max(job.progress_done, job.progress_total or 0)
    _finish(session, job, "done", now)


# ----------------------------------------------------------------------------- reconciler


@dataclass
class Reconciled:
    resend: list[JobMessage] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    requeued: list[int] = field(default_factory=list)


def reconcile(
    session: Session, *, now: datetime | None = None, settings: Settings | None = None
) -> Reconciled:
    """Repair what the broker lost; run every few seconds by the ingest.

    - a queued job past its expiry: expired, with what to do;
    - a queued job its idle, online worker has not started long after it was sent: the
      message is gone (Redis keeps nothing on disk): sent again with a new attempt;
    - a running job whose worker stopped heartbeating: sent again while attempts remain,
      otherwise failed with that reason;
    - a running job past the hard time limit (plus a minute): failed.

    Only fleet jobs (those with a target) are touched: a terminal `felab bench` job has no
    worker and nothing to reconcile.
    """
    s = _settings(settings)
    now = now or utcnow()
    out = Reconciled()
    workers = {w.id: w for w in session.scalars(select(m.Worker))}
    busy = set(
        session.scalars(select(m.BenchJob.worker_id).where(m.BenchJob.status == "running")).all()
    )
    queued = session.scalars(
        select(m.BenchJob)
        .where(m.BenchJob.status == "queued", m.BenchJob.target.is_not(None))
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
            _finish(
                session,
                job,
                "expired",
                now,
                error=(
                    f"no worker started it within {int(s.job_queue_expire_s // 60)} min: is "
                    f"`felab worker start --name {name}` running on that machine?"
                ),
            )
            out.expired.append(job.id)
            continue
        quiet_since = max(d for d in (job.sent_at, last_done.get(worker.id)) if d is not None)
        stale = now - quiet_since >= _seconds(s.job_resend_after_s)
        if (
            stale
            and is_online(worker, now, s)
            and worker.id not in busy
            and worker.id not in resent_to
        ):
            out.resend.append(_new_attempt(job, now))
            resent_to.add(worker.id)  # one at a time: the worker runs them in order anyway
    running = session.scalars(
        select(m.BenchJob).where(m.BenchJob.status == "running", m.BenchJob.target.is_not(None))
    ).all()
    for job in running:
        worker = workers.get(job.worker_id) if job.worker_id is not None else None
        if worker is None or not is_online(worker, now, s):
            name = worker.name if worker else "the worker"
            why = (
                f"{name} stopped heartbeating while running it (machine asleep, the worker "
                "killed, or the network down)"
            )
            res = _lost(session, job, now, s, why)
            out.resend.extend(res.resend)
            (out.requeued if res.resend else out.failed).append(job.id)
        elif job.started_at is not None and now - job.started_at > _seconds(
            s.job_time_limit_s + 60
        ):
            _finish(
                session,
                job,
                "failed",
                now,
                error=f"ran past the {int(s.job_time_limit_s)} s limit: ask for fewer requests",
            )
            out.failed.append(job.id)
    session.flush()
    return out


# ----------------------------------------------------------------------------- outbox


def claim_outbox(
    session: Session, *, now: datetime | None = None, lease_s: float = 60.0, limit: int = 20
) -> list[m.JobOutbox]:
    """Finished jobs for the bot to post, claimed so a second bot skips them.

    A claim not marked posted within `lease_s` (the bot died mid-post) is handed out again.
    """
    now = now or utcnow()
    q = (
        select(m.JobOutbox)
        .where(
            m.JobOutbox.posted_at.is_(None),
            (m.JobOutbox.claimed_at.is_(None)) | (m.JobOutbox.claimed_at < now - _seconds(lease_s)),
        )
        .order_by(m.JobOutbox.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    rows = list(session.scalars(q).all())
    for row in rows:
        row.claimed_at = now
    session.flush()
    return rows


def mark_posted(
    session: Session, outbox_id: int, *, message_ref: str | None = None, now: datetime | None = None
) -> None:
    """Record that the result was posted; it is never handed out again."""
    row = session.get(m.JobOutbox, outbox_id)
    if row is None:
        raise NotFound(f"no outbox entry {outbox_id}")
    row.posted_at = now or utcnow()
    row.message_ref = message_ref
    session.flush()
