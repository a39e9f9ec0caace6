"""Importing the results CSV `felab bench` wrote: validated per row, all or nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.errors import Invalid
from felab_core.numbers.recording import check_result_row, create_job, record_measured

IMPORT_OUTCOMES = ("recorded", "result only", "already imported", "skipped")
_NEEDED_COLUMNS = ("server", "model", "preset", "concurrency", "writing_tps_p50")


@dataclass(frozen=True)
class ImportedRow:
    """What became of one CSV row: `outcome` is one of IMPORT_OUTCOMES, `reason` says why."""

    line: int  # the row's line in the file (the header is line 1)
    server: str
    model: str
    preset: str
    outcome: str
    reason: str = ""
    tokens_per_s: float | None = None


@dataclass(frozen=True)
class ImportReport:
    rows: tuple[ImportedRow, ...]

    def with_outcome(self, outcome: str) -> tuple[ImportedRow, ...]:
        return tuple(r for r in self.rows if r.outcome == outcome)

    @property
    def new(self) -> bool:
        """Whether the import stored anything."""
        return any(r.outcome in ("recorded", "result only") for r in self.rows)


def _fingerprint(row: Mapping[Any, Any]) -> tuple[tuple[str, str], ...]:
    """A row's identity: its non-empty columns and values (order and blank columns ignored)."""
    return tuple(
        sorted(
            (str(k), str(v).strip())
            for k, v in row.items()
            if k is not None and v is not None and str(v).strip()
        )
    )


def _when(row: Mapping[str, str], default: datetime) -> datetime:
    """When the row was measured (its ISO timestamp), else `default`."""
    try:
        when = datetime.fromisoformat((row.get("timestamp") or "").strip())
    except ValueError:
        return default
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _skip_reason(row: Mapping[str, str]) -> str | None:
    """Why a row cannot be stored, in a student's words (None: it can)."""
    if not (row.get("preset") or "").strip():
        return (
            "no preset named, and only runs with the same preset compare: time it with "
            "`felab bench --preset day2`"
        )
    if not (row.get("model") or "").strip():
        return "no model named: the server did not say which model answered"
    try:
        check_result_row(row)
    except Invalid as exc:
        return str(exc)
    return None


def import_results(
    session: Session,
    member: m.Member,
    rows: Sequence[Mapping[str, str]],
    *,
    now: datetime | None = None,
) -> ImportReport:
    """Record the rows of a results CSV written by `felab bench` as the member's measured runs.

    Each `felab bench` run on one target (same timestamp, host, target, server and preset)
    becomes one job, and each row goes through `record_measured`, so a row of one person at a
    time (concurrency 1) with a writing speed becomes a measured number, and any other row is
    kept as a result only. A row already stored for this member (by an earlier import or by
    their worker) is not stored again, so importing a file twice records nothing new.
    """
    when_now = now or utcnow()
    if rows:
        absent = [c for c in _NEEDED_COLUMNS if c not in rows[0]]
        if absent:
            raise Invalid(
                f"this is not a results file written by `felab bench`: it has no "
                f"{', '.join(absent)} column(s)"
            )
    job_ids = select(m.BenchJob.id).where(m.BenchJob.member_id == member.id)
    seen = {
        _fingerprint(stored)
        for stored in session.scalars(
            select(m.BenchResult.row).where(m.BenchResult.job_id.in_(job_ids))
        )
        if isinstance(stored, dict)
    }
    jobs: dict[tuple[str, ...], m.BenchJob] = {}
    out = []
    for index, row in enumerate(rows):
        line = index + 2
        server = (row.get("server") or "").strip()
        model = (row.get("model") or "").strip()
        preset = (row.get("preset") or "").strip()
        key = _fingerprint(row)
        if key in seen:
            out.append(ImportedRow(line, server, model, preset, "already imported"))
            continue
        reason = _skip_reason(row)
        if reason is not None:
            out.append(ImportedRow(line, server, model, preset, "skipped", reason))
            continue
        checked = check_result_row(row)
        when = _when(row, when_now)
        group = tuple(
            (row.get(c) or "").strip() for c in ("timestamp", "host", "target", "server", "preset")
        )
        job = jobs.get(group)
        if job is None:
            job = create_job(session, member, checked.server, checked.preset, now=when)
            jobs[group] = job
        record_measured(session, job, row, now=when)
        seen.add(key)
        if checked.gives_writing_speed:
            out.append(
                ImportedRow(
                    line,
                    checked.server,
                    checked.model,
                    checked.preset,
                    "recorded",
                    tokens_per_s=checked.writing_tps_p50,
                )
            )
            continue
        if checked.concurrency < 1:
            why = (
                "requests sent at a rate with no cap on how many run at once: a writing speed "
                "is one person's, timed alone (concurrency 1)"
            )
        elif checked.concurrency != 1:
            why = (
                f"{checked.concurrency} users at once: a writing speed is one person's, timed "
                "alone (concurrency 1)"
            )
        elif checked.writing_tps_p50 is None:
            why = "no writing speed in the row (no request wrote tokens)"
        else:
            why = f"{checked.writing_tps_p50:,.0f} tokens per second is not one person's speed"
        out.append(
            ImportedRow(
                line,
                checked.server,
                checked.model,
                checked.preset,
                "result only",
                why,
                checked.writing_tps_p50,
            )
        )
    return ImportReport(tuple(out))
