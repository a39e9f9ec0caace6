"""One load test across several of a member's machines: a job per slice, merged exactly.

A spread run is a parent job on no machine and one slice job per machine. Each slice is an
ordinary job (its own attempt, claim, expiry and signed events) that sends its share of one
schedule from a start all slices share, written on the broker's clock (jobs/clock.py). Target
URLs never leave a machine, so each slice reports a fingerprint of the server it reached; when
the last slice ends, the per-request records of those that agree are merged (engine/merge.py)
into the parent's one result. A slice that failed, was late, or reached another server makes
the result `partial`, saying which slice and why, and keeps it off the leaderboard; it is never
merged silently. Not a Celery chord: its Redis backend runs Lua on the workers, which the fleet's
broker users may not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.engine.merge import MergedRun, ShardRecords, merge_shards, request_from_wire
from felab_core.engine.results import summary_columns
from felab_core.engine.shards import Shard
from felab_core.errors import Invalid
from felab_core.jobs.fleet import is_online, worker_targets
from felab_core.jobs.lifecycle import TERMINAL, Send, finish, new_attempt, send_after_commit
from felab_core.jobs.messages import MAX_SHARDS, JobMessage
from felab_core.jobs.queueing import check_job, server_for, slices_of
from felab_core.jobs.result_checks import check_result
from felab_core.jobs.result_load import Signed, check_slice_report
from felab_core.jobs.result_slices import check_slice_requests, hold_row_to_requests
from felab_core.jobs.result_store import checked_rows, own_columns, store_result
from felab_core.jobs.run import REQUEST_FIELDS
from felab_core.jobs.workload import ASKED, job_workload, spread_problem
from felab_core.numbers.row_checks import check_result_row
from felab_core.settings import Settings, get_settings


@dataclass
class QueuedSpread:
    job: m.BenchJob  # the run, posted when its slices are merged
    slices: list[m.BenchJob]
    messages: list[JobMessage]
    notices: list[str] = field(default_factory=list)


def queue_spread_job(
    session: Session,
    member: m.Member,
    workers: Sequence[m.Worker],
    target: str,
    preset: str = "day2",
    *,
    params: dict[str, int] | None = None,
    send: Send | None = None,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> QueuedSpread:
    """Queue one run of `target` cut into a slice per machine in `workers` (one member's).

    Every machine must pass what a one-machine job passes; the workload must be cut-able
    (jobs/workload.py's spread_problem). The slices share a start FELAB_SPREAD_LEAD_S from now.
    """
    s = settings or get_settings()
    now = now or utcnow()
    params = dict(params or {})
    n = len(workers)
    if not 2 <= n <= MAX_SHARDS:
        raise Invalid(f"a run is spread over 2 to {MAX_SHARDS} machines, not {n}")
    if len({w.id for w in workers}) != n:
        raise Invalid("each machine of a spread run must be a different one")
    if len({w.member_id for w in workers}) != 1:
        raise Invalid("the machines of one spread run must all be one member's")
    workload = None
    for worker in workers:
        workload = check_job(session, member, worker, target, preset, params, s, now)
    assert workload is not None
    problem = spread_problem(workload, n)
    if problem:
        raise Invalid(f"this run cannot be spread: {problem}")
    server = server_for(target)
    start_at = now + timedelta(seconds=s.spread_lead_s)
    common: dict[str, Any] = {
        "member_id": workers[0].member_id,
        "requested_by_id": member.id,
        "server": server,
        "target": target,
        "preset": preset,
        "params": params,
        "status": "queued",
        "created_at": now,
        "shards": n,
        "start_at": start_at,
    }
    parent = m.BenchJob(
        worker_id=None, expires_at=now + timedelta(seconds=s.job_queue_expire_s), **common
    )
    session.add(parent)
    session.flush()
    slices, messages = [], []
    for i, worker in enumerate(workers):
        # A slice nobody took by the shared start is of no use to the run: it expires then.
        part = m.BenchJob(
            worker_id=worker.id, spread_of=parent.id, shard_index=i, expires_at=start_at, **common
        )
        session.add(part)
        session.flush()
        messages.append(new_attempt(part, now))
        slices.append(part)
    session.flush()
    if send is not None:
        send_after_commit(session, send, messages)
    notices = [
        f"{w.name} is offline: its slice will be missing unless it starts within "
        f"{s.spread_lead_s:g} s"
        for w in workers
        if not is_online(w, now, s)
    ]
    return QueuedSpread(parent, slices, messages, notices)


def spread_workers(
    session: Session,
    member: m.Member,
    target: str,
    count: int,
    *,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> list[m.Worker]:
    """`count` of the member's paired, online machines that report `target`, by name."""
    now = now or utcnow()
    mine = session.scalars(
        select(m.Worker)
        .where(m.Worker.member_id == member.id, m.Worker.status == "paired")
        .order_by(m.Worker.name)
    ).all()
    able = [
        w
        for w in mine
        if is_online(w, now, settings) and target in (worker_targets(w) or {target: ""})
    ]
    if len(able) < count:
        have = ", ".join(w.name for w in able) or "none"
        raise Invalid(
            f"a run spread over {count} machines needs {count} of your machines online with "
            f"target {target!r}; you have {len(able)} ({have}): start `felab worker start` on "
            "more, or spread over fewer"
        )
    return list(able[:count])


def store_slice(
    session: Session,
    job: m.BenchJob,
    body: dict[str, Any],
    now: datetime,
    signed: Signed | None = None,
) -> None:
    """Keep what one slice measured for the merge; a slice is never recorded on its own, but
    its row is checked as a run's is, so that one machine's bad row fails its own slice (it
    had been kept, then failed the merge when the honest slice came, blamed on that one)."""
    rows = checked_rows(body)
    record = body.get("record")
    # held to its job as a run is (its share of the requests): a slice's rows and record had
    # skipped the job's checks, kept until the merge
    check_result(job, rows, record, now, signed)
    row = own_columns(rows[0])
    check_result_row({**row, "host": "slice"})  # its host is named at the merge
    report = body.get("shard")
    if not isinstance(report, dict) or not isinstance(report.get("requests"), list):
        raise Invalid("a slice's result carries no per-request records")
    if report.get("index") != job.shard_index or report.get("count") != job.shards:
        raise Invalid(
            f"the result is for slice {report.get('index')} of {report.get('count')}, "
            f"not slice {job.shard_index} of {job.shards}"
        )
    check_slice_report(job, rows, report, now)
    check_slice_requests(job, rows, record, report)  # what the merge reads, held as a record's
    job.record = {
        "slice": report,
        "record": record if isinstance(record, dict) else {},
        "row": row,
    }
    job.summary = None
    job.progress_done = max(job.progress_done, job.progress_total or 0)
    finish(session, job, "done", now)


def follow_slice(session: Session, part: m.BenchJob, now: datetime) -> None:
    """After news of a slice: the run is running once one slice is, merged once all ended."""
    parent = session.get(m.BenchJob, part.spread_of) if part.spread_of is not None else None
    if parent is not None:
        settle(session, parent, now)


def settle(session: Session, parent: m.BenchJob, now: datetime | None = None) -> bool:
    """Merge the slices into `parent` once every one has ended; True when it did."""
    now = now or utcnow()
    if parent.status in TERMINAL:
        return False
    parts = slices_of(session, parent)
    if any(p.status not in TERMINAL for p in parts):
        started = [p.started_at for p in parts if p.started_at is not None]
        if started and parent.status == "queued":
            parent.status = "running"
            parent.started_at = min(started)
        parent.progress_done = sum(p.progress_done for p in parts)
        totals = [p.progress_total for p in parts]
        parent.progress_total = sum(t or 0 for t in totals) if all(totals) else None
        session.flush()
        return False
    _merge_into(session, parent, parts, now)
    return True


def _requests_of(parent: m.BenchJob) -> int | None:
    """How many requests the run was to send, from what was asked (never from a slice)."""
    try:
        return job_workload(parent.preset, dict(parent.params or {}), ASKED).requests
    except Invalid:
        return None


def _fingerprint_text(fp: dict[str, Any]) -> str:
    kind = str(fp.get("kind") or "?")
    version = str(fp.get("version") or "")
    return f"{kind} {version}".strip() + f" serving {fp.get('model') or '?'}"


def _merge_into(
    session: Session, parent: m.BenchJob, parts: list[m.BenchJob], now: datetime
) -> None:
    received: list[ShardRecords] = []
    lost: dict[int, str] = {}
    reports: dict[int, dict[str, Any]] = {}
    reference: dict[str, Any] | None = None
    for part in parts:
        i = part.shard_index or 0
        report = (part.record or {}).get("slice") if part.status == "done" else None
        if not isinstance(report, dict):
            lost[i] = f"{part.status}: {part.error or 'no reason recorded'}"
            continue
        given = report.get("fingerprint")
        fp: dict[str, Any] = given if isinstance(given, dict) else {}
        if reference is None:
            reference = fp
        elif fp != reference:
            lost[i] = (
                f"it reached another server ({_fingerprint_text(fp)}, not "
                f"{_fingerprint_text(reference)}), so its figures are left out"
            )
            continue
        try:
            start = float(report["start_at"])
            duration = float(report["duration_s"])
            if not (math.isfinite(start) and math.isfinite(duration) and 0 <= duration < 86_400):
                raise ValueError("its start or duration is not a time")
            requests = [request_from_wire(r) for r in report["requests"]]
            strays = [q.index for q in requests if q.index % len(parts) != i]
            if strays:
                raise ValueError(f"request {strays[0]} is not this slice's")
        except (KeyError, TypeError, ValueError) as exc:
            lost[i] = f"its records were refused ({exc})"
            continue
        reports[i] = report
        received.append(
            ShardRecords(
                shard=i,
                requests=requests,
                started_ns=int(start * 1e9),  # on the broker's clock, as every slice's
                ended_ns=int((start + duration) * 1e9),
                expected=Shard(i, len(parts)).requests(_requests_of(parent)),
                interrupted=bool(report.get("interrupted")),
            )
        )
    if not received:
        why = "; ".join(f"slice {i + 1}: {r}" for i, r in sorted(lost.items()))
        finish(session, parent, "failed", now, error=f"no slice of the run came back: {why}")
        return
    try:
        merged = merge_shards(received, shards=len(parts), lost=lost)
    except ValueError as exc:
        finish(session, parent, "failed", now, error=f"the slices could not be merged: {exc}")
        return
    by_index = {p.shard_index or 0: p for p in parts}
    first = min(reports)
    template = by_index[first].record or {}
    row = {**dict(template.get("row") or {}), **summary_columns(merged.summary)}
    record = _merged_record(template.get("record") or {}, merged, reports, by_index, session)
    names = [_worker_name(session, by_index[i]) for i in sorted(by_index)]
    try:
        # the merged row and record held as a one-machine job's are (its requests checked again)
        hold_row_to_requests(parent, "the merged run", [row], record)
        store_result(
            session,
            parent,
            " + ".join(names),
            checked_rows({"rows": [row]}),
            record,
            now,
            unverified=merged.partial_reason,
        )
    except Invalid as exc:  # the run's own failure, said on it: never the last slice's
        finish(session, parent, "failed", now, error=f"the slices could not be merged: {exc}")


def _worker_name(session: Session, part: m.BenchJob) -> str:
    worker = session.get(m.Worker, part.worker_id) if part.worker_id is not None else None
    return worker.name if worker is not None else f"slice {(part.shard_index or 0) + 1}"


def _merged_record(
    template: dict[str, Any],
    merged: MergedRun,
    reports: dict[int, dict[str, Any]],
    by_index: dict[int, m.BenchJob],
    session: Session,
) -> dict[str, Any]:
    """The first slice's record with the run's merged figures and every slice's facts."""
    record = dict(template)
    runs = [dict(r) for r in record.get("runs") or [] if isinstance(r, dict)][:1] or [{}]
    run = runs[0]
    run["summary"] = merged.summary.to_json()
    run["requests"] = [
        {k: v for k, v in q.to_json().items() if k in REQUEST_FIELDS} for q in merged.requests
    ]
    run["partial"] = merged.partial_reason
    record["runs"] = runs
    record["spread"] = {
        "slices": len(by_index),
        "partial": merged.partial_reason,
        "machines": [
            {
                "slice": i + 1,
                "worker": _worker_name(session, by_index[i]),
                "requests": len(reports[i]["requests"]) if i in reports else 0,
                "clock": reports[i].get("clock") if i in reports else None,
                "warnings": reports[i].get("warnings") if i in reports else None,
            }
            for i in sorted(by_index)
        ],
    }
    return record
