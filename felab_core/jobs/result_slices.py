"""A spread run's requests held to what a one-machine job's record is held to: each slice's own
list of requests (what the merge reads) checked as compare checks a record's (check_record),
the slice's row to those requests, and the merged run's row and record once more, the same way.

A machine's owner holds its key and may sign anything: a slice whose row said 40 tok/s had
listed requests of 10,000 tok/s (31 tokens in 3 ms of a 0.9 s answer), which only a type check
read; the merge stored them as the run's 10,000 tok/s. Apart from result_checks.py (a job's
rows and record) and spread.py (the slices and their merge).
"""

from __future__ import annotations

import math
from typing import Any

from felab_core.db import models as m
from felab_core.errors import Invalid
from felab_core.jobs.result_checks import check_record
from felab_core.numbers.verdict import against_record

#: The longest inter-token gap a slice sends, in microseconds (engine/merge.py's bound).
_MOST_GAP_US = 3_600_000_000


def _users(row: dict[str, Any]) -> Any:
    text = str(row.get("concurrency")).strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 12 else None


def _with_gaps(which: str, j: int, request: Any) -> Any:
    """A slice's request as a record lists it: its gaps (whole microseconds on the wire) in
    seconds, as itl_s, for compare's rules on TPOT and the time from first token to end."""
    if not isinstance(request, dict):
        return request
    gaps = request.get("itl_us")
    if gaps is None:
        gaps = []
    if not isinstance(gaps, list) or not all(
        type(g) is int and 0 <= g < _MOST_GAP_US for g in gaps
    ):
        raise Invalid(
            f"{which}: request {j} has itl_us that is not a list of microseconds: felab sends "
            "each gap between tokens as a whole number of them"
        )
    out = {k: v for k, v in request.items() if k != "itl_us"}
    out["itl_s"] = [g / 1e6 for g in gaps]
    return out


def _speed(row: dict[str, Any]) -> float | None:
    try:
        value = float(str(row.get("writing_tps_p50")).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def _ok(row: dict[str, Any]) -> int | None:
    text = str(row.get("ok")).strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 12 else None


def hold_row_to_requests(
    job: m.BenchJob, which: str, rows: list[dict[str, Any]], record: dict[str, Any]
) -> None:
    """Refuse (Invalid) `record` where a one-machine job's record would be refused
    (check_record: each request as compare checks it, speed held to TPOT, no request longer
    than its run), and each row whose speed or count of answers is not its own requests'
    (the figure `numbers` judges a job's row by)."""
    check_record(job, record, rows, f"{which}'s requests")
    for row in rows:
        tps, users = _speed(row), _users(row)
        if tps is None or users is None:
            continue
        wrong = against_record(tps, _ok(row), record, users)
        if wrong:
            raise Invalid(f"{which}: {wrong}: a run's row is its own requests' figures")


def check_slice_requests(
    job: m.BenchJob, rows: list[dict[str, Any]], record: Any, report: dict[str, Any]
) -> None:
    """A slice's own requests (its report's list, what the merge reads) held to a job's record
    rules, in a run as long as the slice says it lasted, and its row to them."""
    which = f"slice {(job.shard_index or 0) + 1} of {job.shards}"
    listed = report.get("requests")
    requests = [_with_gaps(which, j, q) for j, q in enumerate(listed or [], 1)]
    run = {
        "concurrency": _users(rows[0]) if rows else None,
        "summary": {"duration_s": report.get("duration_s")},
        "requests": requests,
    }
    base = record if isinstance(record, dict) else {}
    # "spread": each slice keeps its own streams (record_runs.check_run_bounds)
    held = {**base, "runs": [run], "spread": {"slice": (job.shard_index or 0) + 1}}
    hold_row_to_requests(job, which, rows, held)
