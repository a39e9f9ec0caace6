"""A machine's result held to its job's load and to the time it had: the runs the job asked
(one a concurrency), each row and the record's workload the job's own knobs (rate, warm-up,
seed, prompt, temperature...), and no run longer than the time from the job's making to the
result's arrival.

A machine's owner holds its key and may sign anything: a record of 64 runs had been stored for
a one-run job, a day2 row run open loop at 50 req/s with no warm-up as the day2 job's, and a
row of a 20-hour run (TTFT 9,000 s) that arrived a second after its job was made. Apart from
result_checks.py (the rows' own fields and the record's requests).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from felab_core.db import models as m
from felab_core.engine.workloads import Workload
from felab_core.errors import Invalid

#: A machine's clock may be this far off the server's (the ingest takes events signed as far):
#: for the times a machine writes (a row's timestamp), never for a run's length, which is its
#: own clock's difference and fits in the time the server saw pass (sweep 22, b, B13: a 250 s
#: run had been taken 1 s after its job was made).
CLOCK_SLACK = timedelta(seconds=300)
#: The edges of the time the server saw between a job's making and its result's arrival (both
#: on the server's clock): a run fits in that, and these seconds more.
RUN_EDGE_S = 2.0
#: A second for the clocks and a run's own edges.
_EDGE_S = 1.0
#: How far a machine's clock may step (NTP) between a run's start and the result's signing,
#: both on that clock: the time between them fits in the time the server saw pass.
SIGNED_EDGE_S = 5.0
#: The row's latency columns, each no longer than its run.
_LATENCIES = ("ttft_p50_s", "ttft_p95_s", "e2e_p50_s", "e2e_p95_s")


def aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Signed:
    """When a machine signed a result (`at`: seconds, on its own clock) and since when the run
    it answers was its to do (`since`, on the server's clock: the send of the attempt it names,
    or the job's making for an earlier attempt)."""

    at: float
    since: datetime


def check_timed(
    job: m.BenchJob, what: str, stamp: Any, now: datetime | None, signed: Signed | None = None
) -> None:
    """Refuse (Invalid) a run timed at `stamp` before its job was made or sent, or after its
    result arrived. Against the server's clock a machine's clock gets CLOCK_SLACK; against the
    result's own signing time (the same clock, sweep 24 M3: a run kept from 152 s before its
    job was made, signed afresh, had passed the slack) the run's start is no further back than
    the job's send from the result's arrival, on the server's clock."""
    try:
        at = aware(datetime.fromisoformat(str(stamp)))
    except (TypeError, ValueError):
        raise Invalid(f"{what} has timestamp {str(stamp)[:40]!r}, not a time") from None
    made = aware(job.created_at)
    copied = "a result is measured for its job, not copied from another run"
    if at < made - CLOCK_SLACK:
        raise Invalid(
            f"{what} was timed at {at.isoformat()}, before job {job.id} was made "
            f"({made.isoformat()}): {copied}"
        )
    if now is not None and at > aware(now) + CLOCK_SLACK:
        raise Invalid(
            f"{what} was timed at {at.isoformat()}, after its result arrived "
            f"({aware(now).isoformat()}): a run is timed before it is sent"
        )
    if signed is None or now is None:
        return
    since = aware(signed.since)
    ran_for = signed.at - at.timestamp()  # the machine's clock both: no offset between clocks
    had = (aware(now) - since).total_seconds()
    if ran_for > max(had, 0.0) + SIGNED_EDGE_S:
        done = "made" if since == made else "sent to its machine"
        raise Invalid(
            f"{what} was timed at {at.isoformat()}, before job {job.id} was {done} "
            f"({since.isoformat()}): its machine signed the result {ran_for:,.0f} s after that "
            f"time, and the job was {done} {max(had, 0.0):,.0f} s before the result arrived; "
            f"{copied}"
        )
    if -ran_for > SIGNED_EDGE_S:
        raise Invalid(
            f"{what} was timed at {at.isoformat()}, {-ran_for:,.0f} s after its machine signed "
            "the result (on its own clock): a run is timed before it is sent"
        )


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        got = float(str(value).strip())
    except ValueError:
        return None
    return got if math.isfinite(got) else None


def _users(value: Any) -> Any:
    text = str(value).strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 12 else value


def check_runs(job: m.BenchJob, w: Workload, rows: list[dict[str, Any]], record: Any) -> None:
    """One run, and one row, a concurrency the job asked: no more, no fewer, none twice."""
    asked = Counter(w.concurrency)
    said = ", ".join(str(c) for c in w.concurrency)
    rows_at = Counter(_users(r.get("concurrency")) for r in rows)
    if rows_at != asked:
        raise Invalid(
            f"the result has {len(rows)} row(s), at concurrency "
            f"{', '.join(str(c)[:20] for c in rows_at)}; job {job.id} asked one run at each of "
            f"{said}: a result is the job's runs, each once"
        )
    runs = record.get("runs") if isinstance(record, dict) else None
    if not isinstance(runs, list):
        raise Invalid(f"job {job.id}'s record has no list of runs: felab writes one a run")
    runs_at = Counter(_users(r.get("concurrency")) if isinstance(r, dict) else None for r in runs)
    if runs_at != asked:
        raise Invalid(
            f"job {job.id}'s record holds {len(runs)} run(s), at concurrency "
            f"{', '.join(str(c)[:20] for c in list(runs_at)[:8])}; the job asked one run at "
            f"each of {said}: a result is the job's runs, each once"
        )
    if job.spread_of is not None:
        return  # a slice's requests travel in its own list (spread.py), its runs' are empty
    sent = {_users(r.get("concurrency")): str(r.get("requests")).strip() for r in rows}
    for i, run in enumerate(runs, 1):
        listed = run.get("requests") if isinstance(run, dict) else None
        count = len(listed) if isinstance(listed, list) else None
        if str(count) != sent.get(_users(run.get("concurrency"))):
            raise Invalid(
                f"job {job.id}'s record: run {i} lists {count} request(s), and its row says "
                f"{sent.get(_users(run.get('concurrency')), '')[:20]}: felab writes every "
                "request of a run in its record"
            )


def _expected_row(w: Workload) -> dict[str, float | str | None]:
    """The load columns felab_core.engine.results.csv_row writes for `w` (None: empty)."""
    return {
        "rate": w.rate,
        "burstiness": w.burstiness if w.rate is not None else None,
        "warmup": str(w.warmup),
        "seed": str(w.seed),
        "prompt_tokens": None if w.prompt_tokens is None else str(w.prompt_tokens),
        "shared_prefix_tokens": str(w.shared_prefix_tokens),
    }


def expected_workload(w: Workload) -> dict[str, Any]:
    """The record's workload felab_core.engine.measure writes for `w` (TargetResult.to_json)."""
    return w.to_record()


def _same(got: Any, want: Any) -> bool:
    if want is None or isinstance(want, str | list | dict):
        return bool(got == want)
    if isinstance(want, bool):
        return got is want
    return type(got) in (int, float) and got == want


def check_load(job: m.BenchJob, w: Workload, rows: list[dict[str, Any]], record: Any) -> None:
    """Each row's load columns and the record's workload those of the job's workload."""
    for n, row in enumerate(rows, 1):
        for key, want in _expected_row(w).items():
            cell = row.get(key)
            if key not in row or cell is None:
                raise Invalid(
                    f"row {n} of the result has no {key}: felab writes it in every row "
                    "(empty where it does not apply), so this row is none a worker sent"
                )
            text = str(cell).strip()
            fine = (
                text == ""
                if want is None
                else (_float(text) == want if isinstance(want, float) else text == want)
            )
            if not fine:
                shown = "none" if want is None else f"{want:g}" if isinstance(want, float) else want
                raise Invalid(
                    f"row {n} of the result ran at {key} {text[:20] or 'none'!r}; job {job.id} "
                    f"asked {key} {shown!r} (preset {w.preset!r}): a job's run is its own load"
                )
    asked = record.get("workload") if isinstance(record, dict) else None
    if not isinstance(asked, dict):
        raise Invalid(f"job {job.id}'s record has no workload: felab writes the load it ran there")
    for key, want in expected_workload(w).items():
        if key not in asked:
            raise Invalid(
                f"job {job.id}'s record's workload has no {key}: felab writes every knob there"
            )
        if not _same(asked[key], want):
            raise Invalid(
                f"job {job.id}'s record ran at {key} {str(asked[key])[:40]}; the job asked "
                f"{key} {want} (preset {w.preset!r}): a job's run is its own load"
            )


def time_had(job: m.BenchJob, now: datetime) -> float:
    """The most seconds a run of `job` may last: from its making to its result's arrival, both
    on the server's clock (no clock slack: a run's length is the machine's own difference)."""
    return max((aware(now) - aware(job.created_at)).total_seconds(), 0.0) + RUN_EDGE_S


def check_lengths(job: m.BenchJob, rows: list[dict[str, Any]], record: Any, now: datetime) -> None:
    """No run longer than the time from the job's making to the result's arrival (time_had),
    all runs together no longer either, and no row's latency longer than its run: a run's
    summary duration_s, each row's ok / request_tps."""
    made = aware(job.created_at)
    had = time_had(job, now)
    window = (
        f"job {job.id} was made at {made.isoformat()} and its result arrived "
        f"{(aware(now) - made).total_seconds():,.0f} s later"
    )
    runs = record.get("runs") if isinstance(record, dict) else []
    lasted: dict[Any, float] = {}
    for i, run in enumerate(runs if isinstance(runs, list) else [], 1):
        summary = run.get("summary") if isinstance(run, dict) else None
        took = _float(summary.get("duration_s")) if isinstance(summary, dict) else None
        if took is None or took < 0:
            raise Invalid(
                f"job {job.id}'s record: run {i} has no summary duration_s (seconds, 0 or "
                "more): felab writes how long each run lasted"
            )
        if took > had:
            raise Invalid(f"job {job.id}'s record: run {i} lasted {took:,.6g} s, and {window}")
        lasted[_users(run.get("concurrency"))] = took
    total = math.fsum(lasted.values())
    if total > had:
        raise Invalid(f"job {job.id}'s record: its runs lasted {total:,.6g} s in all, and {window}")
    for n, row in enumerate(rows, 1):
        what = f"row {n} of the result"
        ok, rate = _float(row.get("ok")), _float(row.get("request_tps"))
        took = ok / rate if ok and rate and rate > 0 else None
        if took is not None and took > had + _EDGE_S:
            raise Invalid(
                f"{what} finished {ok:g} requests at {rate:g} req/s, a run of {took:,.6g} s, "
                f"and {window}"
            )
        run_s = lasted.get(_users(row.get("concurrency")))
        longest = min(t for t in (had, run_s, took) if t is not None)
        for key in _LATENCIES:
            value = _float(row.get(key))
            if value is not None and value > longest + _EDGE_S:
                raise Invalid(
                    f"{what} has {key} = {value:,.6g} s, longer than its run could last "
                    f"({longest:,.6g} s; {window})"
                )


def check_slice_report(
    job: m.BenchJob, rows: list[dict[str, Any]], report: dict[str, Any], now: datetime
) -> None:
    """A slice's own list of requests (what the merge reads) as many as its row says it sent,
    and its length within the time since the job was made, as a run's."""
    listed = report.get("requests")
    sent = str(rows[0].get("requests")).strip() if rows else ""
    which = f"slice {(job.shard_index or 0) + 1} of {job.shards}"
    if not isinstance(listed, list) or str(len(listed)) != sent:
        count = len(listed) if isinstance(listed, list) else "no"
        raise Invalid(
            f"{which} lists {count} request(s) in its records, and its row says {sent[:20]}: "
            "felab sends every request of a slice"
        )
    made = aware(job.created_at)
    had = time_had(job, now)
    took = _float(report.get("duration_s"))
    if took is None or not 0 <= took <= had:
        raise Invalid(
            f"{which} lasted {str(report.get('duration_s'))[:20]} s, and job {job.id} was made "
            f"{(aware(now) - made).total_seconds():,.0f} s before it arrived: felab sends how "
            "long a slice lasted, in seconds"
        )
