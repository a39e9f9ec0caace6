"""A machine's result held to its own job before the ingest stores it: each row the job's
workload (preset, users, requests, max tokens, target, run after the job was made), and the
record beside the rows a record felab writes (each request checked as compare checks it).

A machine's owner holds its key and may sign anything: a one-user, three-request row had been
stored as the figure of a job that asked 64 users, and a record of -1e300 tok/s was drawn as
the job's chart. Apart from ingest.py (who may send what) and result_store.py (storing).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from felab_core.db import models as m
from felab_core.engine.record_requests import CompareError, checked_sample, cut, finite
from felab_core.engine.record_runs import check_run_bounds
from felab_core.engine.shards import Shard
from felab_core.engine.token_counts import MAX_SERVER_TPS
from felab_core.engine.workloads import MAX_TOKENS as MAX_WORKLOAD_TOKENS
from felab_core.engine.workloads import Workload
from felab_core.errors import Invalid
from felab_core.jobs.result_load import (
    Signed,
    check_lengths,
    check_load,
    check_runs,
    check_timed,
)
from felab_core.jobs.workload import ASKED, job_workload

#: The most runs a record holds: one a concurrency of the job (a -c list takes at most 64).
_MOST_RUNS = 64
#: What felab_core.jobs.run writes in every row, never empty (engine/results.csv_row): a row
#: without one is none a worker sent (one request had been stored for an 8-request job whose
#: row left out requests and ok, the checks skipped).
ROW_FIELDS = (
    "timestamp",
    "target",
    "server",
    "preset",
    "concurrency",
    "requests",
    "ok",
    "failed",
    "max_tokens",
)


def _int(value: Any) -> int | None:
    text = str(value).strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 12 else None


def _asked(job: m.BenchJob, w: Workload) -> str:
    users = ", ".join(str(c) for c in w.concurrency)
    parts = [f"preset {w.preset or job.preset!r}", f"{users} user(s)"]
    if w.requests is not None and w.sessions is None:
        parts.append(f"{w.requests} requests")
    if w.max_tokens is not None:
        parts.append(f"max tokens {w.max_tokens}")
    return f"job {job.id} asked {', '.join(parts)}"


def check_result(
    job: m.BenchJob,
    rows: list[dict[str, Any]],
    record: Any,
    now: datetime,
    signed: Signed | None = None,
) -> None:
    """Refuse (Invalid) a result that is not `job`'s run: its rows (check_rows_are_the_jobs),
    the record felab writes beside them (check_record), one run a concurrency the job asked,
    the job's load, and no run longer than the time the job has existed. A slice of a spread
    run is held to the same, with its share of the requests. `signed`: when the machine
    signed it and since when the run it answers was its to do (result_load.Signed)."""
    w = job_workload(job.preset, dict(job.params or {}), ASKED)
    check_rows_are_the_jobs(job, rows, now, signed)
    if not isinstance(record, dict):
        raise Invalid(
            f"job {job.id}'s result has no record: felab sends the run's record with its rows"
        )
    if record.get("started_at") is not None:  # felab writes the run's start there too
        check_timed(job, f"job {job.id}'s record", record["started_at"], now, signed)
    check_record(job, record, rows)
    check_runs(job, w, rows, record)
    check_load(job, w, rows, record)
    check_lengths(job, rows, record, now)


def check_rows_are_the_jobs(
    job: m.BenchJob,
    rows: list[dict[str, Any]],
    now: datetime | None = None,
    signed: Signed | None = None,
) -> None:
    """Refuse (Invalid) a row that lacks a field felab writes, ran another workload than `job`
    asked, named another target, or was timed before the job was made or after `now`."""
    w = job_workload(job.preset, dict(job.params or {}), ASKED)
    fixed = w.requests is not None and w.sessions is None and w.duration_s is None
    sent_asked = w.requests
    if job.spread_of is not None and job.shards and job.shard_index is not None:
        sent_asked = Shard(job.shard_index, job.shards).requests(w.requests)  # its share
    for n, row in enumerate(rows, 1):
        what = f"row {n} of the result"
        for key in ROW_FIELDS:
            if str(row.get(key) if row.get(key) is not None else "").strip() == "":
                raise Invalid(
                    f"{what} has no {key}: felab writes it in every row, so this row is none "
                    f"a worker sent; {_asked(job, w)}"
                )
        preset = str(row["preset"])
        if preset != (w.preset or ""):
            raise Invalid(f"{what} ran preset {preset[:40]!r}; {_asked(job, w)}")
        users = _int(row["concurrency"])
        if users not in w.concurrency:
            raise Invalid(f"{what} ran at {str(row['concurrency'])[:20]} user(s); {_asked(job, w)}")
        sent, ok, failed = _int(row["requests"]), _int(row["ok"]), _int(row["failed"])
        if sent is None or ok is None or failed is None or ok + failed != sent:
            raise Invalid(
                f"{what} has requests {str(row['requests'])[:20]}, ok {str(row['ok'])[:20]} and "
                f"failed {str(row['failed'])[:20]}: felab writes whole numbers, ok + failed "
                "= requests"
            )
        if fixed and sent != sent_asked:
            raise Invalid(f"{what} sent {sent} requests; {_asked(job, w)}")
        if _int(row["max_tokens"]) != w.max_tokens:
            raise Invalid(
                f"{what} ran at max tokens {str(row['max_tokens'])[:20]}; {_asked(job, w)}"
            )
        target = str(row["target"])
        if target != (job.target or ""):
            raise Invalid(
                f"{what} measured target {target[:64]!r}; job {job.id} asked {job.target!r}"
            )
        check_timed(job, what, row["timestamp"], now, signed)


def check_record(
    job: m.BenchJob, record: dict[str, Any], rows: list[dict[str, Any]], named: str = ""
) -> None:
    """Refuse (Invalid) a record felab could not have written for these rows: each request's
    figures checked as `felab compare` checks them, each run one of the rows' concurrencies,
    and the server it names the rows' server. `named`: what the messages call it."""
    label = Path(named or f"job {job.id}'s record")
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
            # needs beside a TPOT: the speed and TPOT are held to each other here instead (a
            # slice's requests keep theirs, result_slices.py, and are held to them as well)
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
    if request.get("itl_s") is not None:  # a slice's request keeps its gaps: compare's rule
        return request
    return {k: v for k, v in request.items() if k not in ("writing_tps", "tpot_s")}
