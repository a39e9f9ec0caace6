"""What workers report, applied by the trusted ingest: the only writer of job events.

Every event is signed by the worker that sent it; one that names a job assigned to another
worker is refused, and one from an old attempt or for a finished job is dropped.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.errors import Forbidden, Invalid
from felab_core.jobs.fleet import clean_targets
from felab_core.jobs.keys import verify
from felab_core.jobs.lifecycle import TERMINAL, finish, lose, start
from felab_core.jobs.messages import JobMessage
from felab_core.numbers.service import record_measured
from felab_core.settings import Settings, get_settings


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
    s = settings or get_settings()
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
        start(session, job, worker, now)
        return Ingested(True, job=job)
    if kind == "progress":
        if job.status == "queued":
            start(session, job, worker, now)
        job.progress_done = max(job.progress_done, int(body.get("done", 0)))
        total = body.get("total")
        job.progress_total = int(total) if total is not None else job.progress_total
        session.flush()
        return Ingested(True, job=job)
    if kind == "failed":
        reason = str(body.get("reason") or "the worker reported a failure without a reason")
        finish(session, job, "failed", now, error=reason[:2000])
        return Ingested(True, job=job)
    if kind == "lost":
        why = "the worker process running the job died (killed or out of memory)"
        message = lose(session, job, now, s, why)
        return Ingested(True, job=job, resend=[message] if message else [])
    if kind == "result":
        _store_result(session, job, body, now)
        return Ingested(True, job=job)
    raise Invalid(f"unknown event kind {kind!r}")


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
    finish(session, job, "done", now)
