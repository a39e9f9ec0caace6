"""Storing a finished job's figures: each row judged and recorded, the record, the chart.

The ingest stores what one machine measured; a spread run (spread.py) stores what its slices
measured together. Both end here, so a result is judged and shown one way.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.engine.results import CSV_COLUMNS, JOB_ROW_EXTRAS, short_model
from felab_core.errors import Invalid
from felab_core.jobs.lifecycle import finish
from felab_core.jobs.render import chart_png
from felab_core.numbers.recording import record_measured
from felab_core.numbers.verdict import judge

#: The most runs one result may hold.
MAX_ROWS = 64


_COLUMNS = frozenset((*CSV_COLUMNS, *JOB_ROW_EXTRAS))


def checked_rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A result's CSV rows, refused unless there are 1 to MAX_ROWS objects."""
    rows = body.get("rows")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise Invalid("a result needs at least one CSV row")
    if len(rows) > MAX_ROWS:
        raise Invalid(f"a result has at most {MAX_ROWS} runs, not {len(rows)}")
    return rows


def own_columns(row: dict[str, Any]) -> dict[str, str]:
    """felab's own columns of a machine's row, as text: made-up keys ('=HYPERLINK(...)',
    escape codes) had become the header of the CSV the bot posts."""
    return {k: str(v)[:300] for k, v in row.items() if k in _COLUMNS}


def _number(row: dict[str, str], key: str) -> float | None:
    try:
        value = float(row.get(key) or "")
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def store_result(
    session: Session,
    job: m.BenchJob,
    host: str,
    rows: list[dict[str, Any]],
    record: dict[str, Any] | None,
    now: datetime,
    *,
    unverified: str | None = None,
) -> None:
    """Record each run of `job` as measured on the machine called `host`, then finish it.

    `unverified` (why, such as a spread run short of a slice) keeps its speeds off the
    leaderboard: listed apart, with the reason.
    """
    owner = session.get(m.Member, job.member_id)
    for row in rows:
        clean = own_columns(row)
        clean["host"] = host  # a machine's name as its owner chose it, never its host name
        verdict = ("ok", "")
        tps, ok, concurrency = (
            _number(clean, "writing_tps_p50"),
            _number(clean, "ok"),
            _number(clean, "concurrency"),
        )
        if owner is not None and tps is not None and tps > 0 and concurrency is not None:
            judged = judge(
                session,
                owner,
                str(clean.get("server") or job.server),
                tps,
                ok=None if ok is None else int(ok),
                record=record or {},
                concurrency=int(concurrency),
                model=str(clean.get("model") or "") or None,
            )
            verdict = (judged.verdict, judged.note)
        if unverified is not None and verdict[0] == "ok":
            verdict = ("unverified", unverified)
        record_measured(session, job, clean, verdict=verdict, now=now)
    job.record = record
    job.summary = None
    model = short_model(str(rows[0].get("model") or "")) or job.target or job.server
    job.chart_png = chart_png(record, f"{host}: {model}")
    job.progress_done = max(job.progress_done, job.progress_total or 0)
    finish(session, job, "done", now, error=unverified)  # a partial run says why in its row
