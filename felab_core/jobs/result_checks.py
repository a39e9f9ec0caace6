"""A machine's result held to its own job before the ingest stores it: each row the job's
workload (preset, users, requests, max tokens, target, run after the job was made), and the
record beside the rows a record felab writes (each request checked as compare checks it).

A machine's owner holds its key and may sign anything: a one-user, three-request row had been
stored as the figure of a job that asked 64 users, and a record of -1e300 tok/s was drawn as
the job's chart. Apart from ingest.py (who may send what) and result_store.py (storing).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from felab_core.db import models as m
from felab_core.engine.record_requests import CompareError, checked_sample, cut, finite
from felab_core.engine.record_runs import check_run_bounds
from felab_core.engine.token_counts import MAX_SERVER_TPS
from felab_core.engine.workloads import MAX_TOKENS as MAX_WORKLOAD_TOKENS
from felab_core.engine.workloads import Workload
from felab_core.errors import Invalid
from felab_core.jobs.workload import ASKED, job_workload

#: A machine's clock may be this far off the server's (the ingest takes events signed as far).
_CLOCK_SLACK = timedelta(seconds=300)
#: The most runs a record holds: one a concurrency of the job (a -c list takes at most 64).
_MOST_RUNS = 64


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _asked(job: m.BenchJob, w: Workload) -> str:
    users = ", ".join(str(c) for c in w.concurrency)
    parts = [f"preset {w.preset or job.preset!r}", f"{users} user(s)"]
    if w.requests is not None and w.sessions is None:
        parts.append(f"{w.requests} requests")
    if w.max_tokens is not None:
        parts.append(f"max tokens {w.max_tokens}")
    return f"job {job.id} asked {', '.join(parts)}"


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def check_rows_are_the_jobs(job: m.BenchJob, rows: list[dict[str, Any]]) -> None:
    """Refuse (Invalid) a row that ran another workload than `job` asked, named another
    target, or was timed before the job was made."""
    try:
        w = job_workload(job.preset, dict(job.params or {}), ASKED)
    except Invalid:
        return  # a stored job that no longer reads: it was checked when it was asked for
    fixed = w.requests is not None and w.sessions is None and w.duration_s is None
    for n, row in enumerate(rows, 1):
        what = f"row {n} of the result"
        preset = str(row.get("preset") or "")
        if preset != (w.preset or ""):
            raise Invalid(f"{what} ran preset {preset[:40]!r}; {_asked(job, w)}")
        users = _int(row.get("concurrency"))
        if users is not None and users not in w.concurrency:
            raise Invalid(f"{what} ran at {users} user(s); {_asked(job, w)}")
        sent = _int(row.get("requests"))
        if fixed and row.get("requests") not in (None, "") and sent != w.requests:
            raise Invalid(f"{what} sent {str(row.get('requests'))[:20]} requests; {_asked(job, w)}")
        most = row.get("max_tokens")
        if w.max_tokens is not None and most not in (None, "") and _int(most) != w.max_tokens:
            raise Invalid(f"{what} ran at max tokens {str(most)[:20]}; {_asked(job, w)}")
        target = row.get("target")
        if job.target and target not in (None, "") and str(target) != job.target:
            raise Invalid(
                f"{what} measured target {str(target)[:64]!r}; job {job.id} asked {job.target!r}"
            )
        _check_time(job, what, row.get("timestamp"))


def _check_time(job: m.BenchJob, what: str, stamp: Any) -> None:
    if stamp in (None, ""):
        return
    try:
        at = _aware(datetime.fromisoformat(str(stamp)))
    except ValueError:
        raise Invalid(f"{what} has timestamp {str(stamp)[:40]!r}, not a time") from None
    made = _aware(job.created_at)
    if at < made - _CLOCK_SLACK:
        raise Invalid(
            f"{what} was timed at {at.isoformat()}, before job {job.id} was made "
            f"({made.isoformat()}): a result is measured for its job, not copied from another run"
        )


def check_record(job: m.BenchJob, record: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Refuse (Invalid) a record felab could not have written for these rows: each request's
    figures checked as `felab compare` checks them, each run one of the rows' concurrencies,
    and the server it names the rows' server."""
    label = Path(f"job {job.id}'s record")
    runs = record.get("runs")
    if not isinstance(runs, list) or len(runs) > _MOST_RUNS:
        raise Invalid(f"{label}: runs is not a list of at most {_MOST_RUNS} runs")
    users = {_int(r.get("concurrency")) for r in rows}
    servers = {str(r.get("server") or "") for r in rows}
    server = record.get("server")
    if server is not None:
        kind = server.get("kind") if isinstance(server, dict) else server
        if not isinstance(server, dict) or (kind is not None and str(kind) not in servers):
            raise Invalid(
                f"{label}: server is {str(kind)[:40]!r}, and the rows measured "
                f"{', '.join(sorted(servers))}"
            )
    asked = (record.get("workload") or {}) if isinstance(record.get("workload"), dict) else {}
    most = asked.get("max_tokens")
    gaps = 4 * most + 256 if type(most) is int and 1 <= most <= MAX_WORKLOAD_TOKENS else None
    try:
        for i, run in enumerate(runs, 1):
            requests = run.get("requests") if isinstance(run, dict) else None
            if not isinstance(requests, list):
                raise Invalid(f"{label}: run {i} has no list of requests")
            if run.get("concurrency") not in users:
                raise Invalid(
                    f"{label}: run {i} is at concurrency {str(run.get('concurrency'))[:20]}, "
                    f"and the rows ran at {', '.join(str(u) for u in sorted(users, key=str))}"
                )
            # a job's record keeps no inter-token gaps (run.REQUEST_FIELDS), which compare
            # needs beside a TPOT: the speed and TPOT are held to each other here instead
            bare = [_without_tpot(label, i, j, q) for j, q in enumerate(requests, 1)]
            if gaps is None:
                checked_sample(label, i, bare)
            else:
                checked_sample(label, i, bare, gaps)
            if requests:
                check_run_bounds(label, i, run, requests, record)
    except CompareError as exc:
        raise Invalid(
            str(exc).replace("the file was edited or broken", "not figures felab measures")
        ) from None


def _without_tpot(label: Path, run: int, index: int, request: Any) -> Any:
    """`request` less its TPOT and speed, once those are a speed felab measures (finite, above
    0, at most MAX_SERVER_TPS a stream) written as 1 / TPOT."""
    if not isinstance(request, dict):
        return request
    where = f"{label}: run {run}, request {index}"
    speed, tpot = request.get("writing_tps"), request.get("tpot_s")
    if speed is None and tpot is None:
        return request
    if not (finite(speed) and finite(tpot) and 0 < speed <= MAX_SERVER_TPS and tpot > 0):
        raise Invalid(
            f"{where} has writing_tps = {cut(speed)} and tpot_s = {cut(tpot)}, not a speed "
            f"felab measures (above 0, at most {MAX_SERVER_TPS:,.0f} tokens a second)"
        )
    if abs(speed * tpot - 1.0) > 1e-9:
        raise Invalid(
            f"{where} has writing_tps = {cut(speed)} beside tpot_s = {cut(tpot)}: felab writes "
            "the speed as 1 / tpot_s"
        )
    return {k: v for k, v in request.items() if k not in ("writing_tps", "tpot_s")}
