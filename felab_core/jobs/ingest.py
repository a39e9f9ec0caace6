"""What workers report, applied by the trusted ingest: the only writer of job events.

Every event must be signed by a paired worker, recent, and (for a job) name a job assigned to
that worker; heartbeats carry a sequence number that only grows, so a copied one is refused.
Once an event passes those checks, anything wrong with its content fails the job with the
reason, at once: a result that is too big, malformed, or measured something else.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.session import on_commit
from felab_core.db.types import utcnow
from felab_core.errors import Forbidden, Invalid, ServiceError
from felab_core.jobs.fleet import ago_s, clean_targets
from felab_core.jobs.keys import verify
from felab_core.jobs.lifecycle import TERMINAL, finish, lose, start
from felab_core.jobs.messages import JobMessage
from felab_core.jobs.result_checks import check_result
from felab_core.jobs.result_load import Signed
from felab_core.jobs.result_store import checked_rows, store_result
from felab_core.jobs.spread import follow_slice, store_slice
from felab_core.jobs.workload import progress_total, too_large_reason
from felab_core.ops import metrics
from felab_core.redact import redact
from felab_core.settings import Settings, get_settings
from felab_core.text import with_hidden_shown

#: Events that must reach the ingest once: the worker keeps them until acknowledged.
ACKED_KINDS = ("result", "failed", "lost")
#: An event signed longer ago than this, or this far in the future, is refused: a worker
#: re-signs what it sends again, so only a copy is ever this old.
MAX_EVENT_AGE_S = 3600.0
MAX_EVENT_SKEW_S = 300.0


@dataclass(frozen=True)
class Ack:
    """Tell worker `worker_id` that the ingest has its event for (job, attempt)."""

    worker_id: int
    job_id: int
    attempt: str


@dataclass
class Ingested:
    """What an event did: `accepted` False with the reason when it was dropped."""

    accepted: bool
    reason: str = ""
    job: m.BenchJob | None = None
    resend: list[JobMessage] = field(default_factory=list)
    ack: Ack | None = None
    withdraw: list[tuple[int, int]] = field(default_factory=list)  # (worker, job) claims


#: The largest id, sequence number or count an event may carry: a database's 64-bit integer
#: (10**30 or 1e309 had ended in an OverflowError traceback on the ingest's output).
_MOST_ID = 2**63 - 1


def _whole(value: Any) -> int | None:
    """`value` when it is a whole number a database column holds, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MOST_ID:
        return value
    return None


def _signed_at(payload: dict[str, Any], now: datetime) -> None:
    at = payload.get("at")
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
        raise Forbidden(  # NaN had passed both comparisons below
            "the event carries no time it was signed: refused", reason="stale"
        )
    age = now.timestamp() - at
    if age > MAX_EVENT_AGE_S or age < -MAX_EVENT_SKEW_S:
        raise Forbidden(  # "7205 s from now" had been said of one 2 h old
            f"the event was signed {ago_s(age)}: an old copy (or a clock far off) is refused",
            reason="stale",
        )


def _heartbeat(session: Session, worker: m.Worker, body: Any) -> Ingested:
    seq = _whole(body.get("seq")) if isinstance(body, dict) else None
    if seq is None:
        raise Forbidden(
            f"a heartbeat of {worker.name!r} without a sequence number: refused", reason="replay"
        )
    if seq <= worker.heartbeat_seq:
        raise Forbidden(
            f"a replayed heartbeat of {worker.name!r} (sequence {seq}): refused", reason="replay"
        )
    worker.heartbeat_seq = seq
    reported = clean_targets(body.get("targets"))
    if reported is not None and reported != worker.targets:
        worker.targets = reported
    running = _whole(body.get("running"))
    worker.running_job_id = None
    if running is not None:
        job = session.get(m.BenchJob, running)
        # only a job still to be done there: a finished one named as running had shown the
        # machine busy on it in `felab status` (sweep 20, b, B17)
        if job is not None and job.worker_id == worker.id and job.status in ("queued", "running"):
            worker.running_job_id = job.id
    session.flush()
    return Ingested(True)


def ingest_event(
    session: Session,
    payload: dict[str, Any],
    *,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> Ingested:
    """Apply one signed event from a worker. Only the trusted ingest calls this.

    Raises Forbidden for a message that no paired worker signed, an old or replayed one, or one
    that names a job assigned to another worker; returns accepted=False for a late event (old
    attempt, finished job).
    """
    s = settings or get_settings()
    now = now or utcnow()
    if not isinstance(payload, dict):
        raise Invalid("not a felab worker event", reason="malformed")
    worker_id, kind = _whole(payload.get("worker_id")), payload.get("kind")
    if worker_id is None or not isinstance(kind, str):  # 1e309, 10**30, "5"
        raise Invalid("not a felab worker event", reason="malformed")
    worker = session.get(m.Worker, worker_id)
    if worker is None or not worker.public_key or worker.status != "paired":
        raise Forbidden(f"no paired worker {worker_id}: the event was refused", reason="unknown")
    verify(payload, worker.public_key)
    _signed_at(payload, now)
    worker.last_seen_at = now
    if kind == "heartbeat":
        return _heartbeat(session, worker, payload.get("body"))
    res = _job_event(session, worker, kind, payload, now, s)
    if res.job is not None and res.job.spread_of is not None:
        follow_slice(session, res.job, now)  # the run it is a slice of may now be whole
    return res


def _job_event(
    session: Session,
    worker: m.Worker,
    kind: str,
    payload: dict[str, Any],
    now: datetime,
    s: Settings,
) -> Ingested:
    job_id = _whole(payload.get("job_id"))
    job = session.get(m.BenchJob, job_id) if job_id is not None else None
    if job is None:
        return Ingested(  # a made-up id: the message's, not the machine's job
            False, f"no job {job_id}: the event from machine {worker.name!r} named a job never made"
        )
    if job.worker_id != worker.id:
        raise Forbidden(  # the machine's key signed it: its owner forged or copied it
            f"the event from machine {worker.name!r} named job {job.id}, which that machine "
            "was not given: refused (a forged or copied message; the job is untouched)",
            reason="assignment",
        )
    attempt = str(payload.get("attempt"))
    ack = Ack(worker.id, job.id, attempt) if kind in ACKED_KINDS else None
    if job.status in TERMINAL:
        return Ingested(False, f"job {job.id} is already {job.status}", job, ack=ack)
    body = payload.get("body") or {}
    if not isinstance(body, dict):
        raise Invalid("the event's body is not an object")
    if attempt != job.attempt:
        # A result (or failure) of an earlier attempt, for a job sent again but not started
        # again: the run happened, so it counts, and the new send is withdrawn. Anything else
        # from an old attempt is late.
        if not _ATTEMPT.fullmatch(attempt):  # "wrong-attempt" had failed a queued job
            raise Invalid("the event's attempt is not one felab sends", reason="malformed")
        if not _sent_before(job, attempt):  # a made-up one had been stored as an earlier run
            return Ingested(
                False,
                f"the event from machine {worker.name!r} names attempt {attempt[:8]}... of job "
                f"{job.id}, which felab never sent: dropped (the job is untouched)",
                job,
                ack=ack,
            )
        if kind in ("result", "failed") and job.status == "queued":
            signed = Signed(float(payload["at"]), job.created_at)  # sent before the current
            res = _finished(session, job, worker, kind, body, now, s, signed)
            res.ack = ack
            res.withdraw.append((worker.id, job.id))
            return res
        return Ingested(False, f"late event from an old attempt of job {job.id}", job, ack=ack)
    if kind == "started":
        start(session, job, worker, now)
        return Ingested(True, job=job)
    if kind == "progress":
        if job.status == "queued":
            start(session, job, worker, now)
        done = max(job.progress_done, _count(body.get("done"), job.progress_done))
        total = _count(body.get("total"), 0) or job.progress_total
        asked = progress_total(job.preset, dict(job.params or {}), job.shard_index, job.shards)
        if total and asked and total != asked:  # 10000000/10000000 of a 5-request job was shown
            return Ingested(
                False, f"progress total {total} of job {job.id}: it asked for {asked}", job
            )
        if total and done > total:  # 9999999/3 was stored and shown
            return Ingested(False, f"progress {done}/{total} of job {job.id}: more than all", job)
        job.progress_done, job.progress_total = done, total
        session.flush()
        return Ingested(True, job=job)
    if kind == "stopped":
        return Ingested(False, f"job {job.id} stopped on the machine", job)
    if kind == "lost":
        why = "the worker process running the job died (killed or out of memory)"
        message = lose(session, job, now, s, why)
        return Ingested(True, job=job, resend=[message] if message else [], ack=ack)
    if kind in ("result", "failed"):
        signed = Signed(float(payload["at"]), job.sent_at or job.created_at)
        res = _finished(session, job, worker, kind, body, now, s, signed)
        res.ack = ack
        return res
    raise Invalid(f"unknown event kind {kind!r}")


def _all_finite(value: Any, where: str = "result") -> None:
    """Refuse NaN and infinities anywhere in a result: JSON from a machine may carry them, and
    no figure (nor PostgreSQL's JSON) can hold one."""
    if isinstance(value, float) and not math.isfinite(value):
        raise Invalid(f"{where} is {value}, not a finite number")
    if isinstance(value, dict):
        for k, v in value.items():
            _all_finite(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _all_finite(v, f"{where}[{i}]")


#: An attempt's id as felab makes it (uuid4().hex).
_ATTEMPT = re.compile(r"[0-9a-f]{32}")


def _sent_before(job: m.BenchJob, attempt: str) -> bool:
    """Whether `attempt` names one of the job's sends before its current one: its first 8 hex
    digits are that send's number (lifecycle.attempt_id), a whole number from 1 to the sends
    so far less one; a job whose current attempt is not so numbered vouches for none."""
    sends = job.attempts + job.resends
    current = job.attempt or ""
    if not _ATTEMPT.fullmatch(current) or int(current[:8], 16) != sends:
        return False
    return 1 <= int(attempt[:8], 16) < sends


def _count(value: Any, default: int) -> int:
    """A progress count from a worker: a non-negative int, within reason, else `default`."""
    if isinstance(value, int) and 0 <= value <= 10_000_000:
        return value
    return default


def _finished(
    session: Session,
    job: m.BenchJob,
    worker: m.Worker,
    kind: str,
    body: dict[str, Any],
    now: datetime,
    s: Settings,
    signed: Signed,
) -> Ingested:
    if kind == "failed":
        said = body.get("reason")
        if not isinstance(said, str) or not said.strip():  # {'nested': [...]} was str()-ed
            said = "the worker reported a failure without a reason in words"
        # a machine's words reach an instructor's terminal and chat: never an escape code, and
        # never a password or key the machine put in them
        error = with_hidden_shown(redact(said.strip()))[:2000]
        finish(session, job, "failed", now, error=error)
        return Ingested(True, job=job)
    size = len(json.dumps(body))
    if size > s.result_max_bytes:
        finish(session, job, "failed", now, error=too_large_reason(size, s.result_max_bytes))
        on_commit(session, lambda: metrics.INGEST_REFUSED.labels("too_large").inc())
        return Ingested(False, "result too large", job)
    try:
        with session.begin_nested():
            _all_finite(body)
            if job.spread_of is not None:
                store_slice(session, job, body, now, signed)  # held to its job, as a run is
            else:
                record = body.get("record")
                rows = checked_rows(body)
                check_result(job, rows, record, now, signed)
                store_result(session, job, worker.name, rows, record, now)
    except ServiceError as exc:
        finish(session, job, "failed", now, error=f"the result was refused: {exc}")
        on_commit(session, lambda: metrics.INGEST_REFUSED.labels("result").inc())
        return Ingested(False, f"result refused: {exc}", job)
    return Ingested(True, job=job)
