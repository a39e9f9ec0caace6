"""Importing the results CSV `felab bench` wrote: validated per row, all or nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Table, func, insert, select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.engine.results import CSV_COLUMNS
from felab_core.errors import Invalid
from felab_core.numbers.row_checks import ResultRow, check_result_row
from felab_core.numbers.row_workload import check_preset_knobs
from felab_core.numbers.run_keys import (
    RowRun,
    RunIndex,
    Seen,
    first_difference,
    latencies,
    run_named,
)
from felab_core.numbers.verdict import judge_imports
from felab_core.redact import redact, redact_cached

IMPORT_OUTCOMES = ("recorded", "result only", "already imported", "skipped")
_NEEDED_COLUMNS = ("server", "model", "preset", "concurrency", "writing_tps_p50")
_SHOWN_PROBLEMS = 5
_PROGRESS_EVERY = 1000
_BATCH = 5000


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

    def __post_init__(self) -> None:
        """Every text felab shows about a row, masked: a skipped row's model may hold the key
        it was skipped for (`llama3.1:8b?api_key=...`), and its line is printed."""
        for name in ("server", "model", "preset"):
            object.__setattr__(self, name, redact_cached(getattr(self, name)))
        if self.reason:
            object.__setattr__(self, "reason", redact(self.reason))


@dataclass(frozen=True)
class ImportReport:
    rows: tuple[ImportedRow, ...]

    def with_outcome(self, outcome: str) -> tuple[ImportedRow, ...]:
        return tuple(r for r in self.rows if r.outcome == outcome)

    @property
    def new(self) -> bool:
        """Whether the import stored anything."""
        return any(r.outcome in ("recorded", "result only") for r in self.rows)


def _cells(row: Mapping[Any, Any]) -> dict[str, str]:
    """A row's filled cells, trimmed: all it says (what is stored), and what identifies it."""
    try:  # a CSV or stored row: text keys and values (the fast way, for 60,000 rows)
        return {k: v.strip() for k, v in row.items() if v and not v.isspace()}
    except (AttributeError, TypeError):  # a value that is not text, or an extra cells' list
        return dict(_fingerprint(row))


def _fingerprint(row: Mapping[Any, Any]) -> frozenset[tuple[str, str]]:
    """A row's identity: its non-empty columns and values (order and blank columns ignored)."""
    return frozenset(
        (k if type(k) is str else str(k), text)
        for k, v in row.items()
        if k is not None and v is not None and (text := (v if type(v) is str else str(v)).strip())
    )


def _when(row: Mapping[str, str], default: datetime) -> datetime:
    """When the row was measured (its ISO timestamp), else `default`."""
    try:
        when = datetime.fromisoformat((row.get("timestamp") or "").strip())
    except ValueError:
        return default
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _missing(row: Mapping[str, str]) -> str | None:
    """Why a sound row still cannot count, in a student's words (None: it can)."""
    if not (row.get("preset") or "").strip():
        return (
            "no preset named, and only runs with the same preset compare: time it with "
            "`felab bench --preset day2`"
        )
    if not (row.get("model") or "").strip():
        return "no model named: the server did not say which model answered"
    return None


#: What felab bench writes beside every writing speed it measures: a row that gives a speed
#: with these blank is a speed typed into the file (each check of a row against its own
#: timings passes over a blank cell, so such a row was stored as "measured").
_TIMINGS_BESIDE_A_SPEED = ("timestamp", "requests", "ok", "ttft_p50_s", "tpot_p50_s")


#: What felab bench writes in every row it times (engine.results.csv_row: a run's counts and
#: throughputs, 0 when nothing was answered), and the checks of a row read: a blank one had
#: switched them off (twentieth sweep: a blank request_tps, the start-moved and p95 checks).
#: A row without a preset or a model is skipped before (_missing), whatever else it lacks.
_WRITTEN_IN_EVERY_ROW = ("timestamp", "requests", "ok", "failed", "request_tps", "output_tps")


def _blank_timings(row: Mapping[str, str], *, speed: bool) -> str | None:
    blank = [c for c in _WRITTEN_IN_EVERY_ROW if not (row.get(c) or "").strip()]
    if (row.get("rate") or "").strip() and not (row.get("burstiness") or "").strip():
        blank.append("burstiness")  # written beside every rate (the arrivals' shape)
    if speed:
        blank += [
            c for c in _TIMINGS_BESIDE_A_SPEED if c not in blank and not (row.get(c) or "").strip()
        ]
        if blank:
            return (
                f"a writing speed with {', '.join(blank)} blank: felab bench writes these beside "
                "every speed it measures, so this one was typed in; type it with `felab numbers "
                "enter`, or import the file felab bench wrote"
            )
    if not blank:
        return None
    return (
        f"{', '.join(blank)} blank: felab bench writes {'it' if len(blank) == 1 else 'them'} "
        "in every row it times (0 when nothing was answered), and the checks of a run read "
        f"{'it' if len(blank) == 1 else 'them'}; import the file felab bench wrote, or put "
        "back what it wrote there"
    )


def _why_result_only(checked: ResultRow) -> str:
    if checked.concurrency < 1:
        sent = "at a trace's times" if checked.preset.startswith("trace:") else "at a rate"
        return (
            f"requests sent {sent} with no cap on how many run at once: a writing speed "
            "is one person's, timed alone (concurrency 1)"
        )
    if checked.concurrency != 1:
        return (
            f"{checked.concurrency} users at once: a writing speed is one person's, timed "
            "alone (concurrency 1)"
        )
    if checked.writing_tps_p50 is None:
        return "no writing speed in the row (no request wrote tokens)"
    return f"{checked.writing_tps_p50:,.0f} tokens per second is not one person's speed"


@dataclass(frozen=True)
class _Planned:
    line: int
    row: Mapping[str, str]
    checked: ResultRow
    when: datetime
    group: tuple[str, ...]
    verdict: tuple[str, str | None] = ("ok", None)


def _refusal(problems: list[tuple[int, str]]) -> str:
    shown = redact("; ".join(f"line {line}: {why}" for line, why in problems[:_SHOWN_PROBLEMS]))
    more = len(problems) - _SHOWN_PROBLEMS
    rest = f" (and {more:,} more)" if more > 0 else ""
    return (
        f"{len(problems):,} row(s) cannot be imported, so nothing was stored: {shown}{rest}. "
        "Fix or delete those rows, or import the others with --skip-invalid"
    )


def check_columns(columns: Sequence[str]) -> None:
    """Refuse a CSV that `felab bench` did not write, naming the columns it lacks."""
    if not columns:
        raise Invalid("the file is empty: it is not a results file written by `felab bench`")
    absent = [c for c in _NEEDED_COLUMNS if c not in columns]
    if absent:
        raise Invalid(
            f"this is not a results file written by `felab bench`: it has no "
            f"{', '.join(absent)} column(s)"
        )
    # Each check of an edited row reads a column: one left out would skip its check, and a
    # hand-typed five-column file was stored as a measured run (thirteenth sweep).
    lacking = [c for c in CSV_COLUMNS if c not in columns]
    if lacking:
        shown = ", ".join(lacking[:5]) + (
            f" and {len(lacking) - 5} more" if len(lacking) > 5 else ""
        )
        raise Invalid(
            f"the file lacks the column(s) {shown} that `felab bench` writes: it was edited or "
            "typed by hand (a header with a space or an invisible character counts), or written "
            "by an older felab; import the results CSV `felab bench` wrote, or run it again into "
            "a new file with --csv"
        )
    # A column felab never writes would be stored with every row (26 MB of one had been), and
    # dropped without a word it could hold what its writer meant the row to say: refused.
    extra = [c for c in columns if c not in CSV_COLUMNS]
    if extra:
        named = [repr(c[:32]) for c in extra[:5]]
        shown = ", ".join(named) + (f" and {len(extra) - 5:,} more" if len(extra) > 5 else "")
        raise Invalid(
            f"the file has the column(s) {shown} that `felab bench` does not write: it was "
            "edited, or joined with another table; delete those columns (felab keeps only its "
            "own) and import it again"
        )


def _stored_runs(stored_rows: Sequence[Mapping[str, str]]) -> RunIndex:
    """The member's stored runs, each once."""
    runs = RunIndex()
    for cells in stored_rows:
        stored_run = RowRun.of(cells)
        if runs.same_run(stored_run) is None:
            runs.add(None, stored_run)
    return runs


def _others_runs(session: Session, member: m.Member) -> RunIndex:
    """Every other member's stored runs, for the copy check only: a run is one run, whoever
    imports it (sweep 22 B12: another member's file, imported unchanged, was ranked twice)."""
    runs = RunIndex()
    others = select(m.BenchJob.id).where(m.BenchJob.member_id != member.id)
    for stored in session.scalars(
        select(m.BenchResult.row).where(m.BenchResult.job_id.in_(others))
    ):
        if isinstance(stored, dict):
            cells = _cells(stored)
            runs.add_measured(
                Seen(None, RowRun(cells, (), None, (), None, measured=latencies(cells)))
            )
    return runs


def _another_members(cells: Mapping[str, str]) -> str:
    return (
        f"this run ({run_named(cells)}) measured every latency a run another member already "
        "imported did, to all digits: no two runs do, so it is that member's run; a run counts "
        "once, for whoever timed it: import the results CSV your own felab bench wrote"
    )


def import_results(
    session: Session,
    member: m.Member,
    rows: Sequence[Mapping[str, str]],
    *,
    now: datetime | None = None,
    skip_invalid: bool = False,
    progress: Callable[[int, int], None] | None = None,
    lines: Sequence[int] | None = None,
) -> ImportReport:
    """Record the rows of a results CSV written by `felab bench` as the member's measured runs.

    Each `felab bench` run on one target (same timestamp, host, target, server and preset)
    becomes one job, and each row is stored as `record_measured` would store it, so a row of
    one person at a time (concurrency 1) with a writing speed becomes a measured number, and
    any other row is kept as a result only. A run already stored for this member (by an earlier
    import or by their worker, or on an earlier line) is not stored again, however its row is
    written (4.46e1 for 44.6, blank columns), so importing a file twice records nothing new; a
    row of a stored run with other figures was edited, and is refused as one.

    Every row is checked before anything is stored: a row with an impossible value (negative,
    NaN, infinite, absurd, an unknown server) refuses the whole import with its line number,
    unless `skip_invalid`, when such rows are skipped with their reason. Rows are written in
    bulk (three statements, not three per row): 60,000 rows take seconds, not minutes
    (benchmarks/csv_import.py). `progress(done, total)` is called as rows are checked.
    `lines`: the line of the file each row is on (read_table_lines; else row i is on line
    i + 2, as in a file without blank lines).
    """
    when_now = now or utcnow()
    if rows:
        check_columns(list(rows[0]))
    job_ids = select(m.BenchJob.id).where(m.BenchJob.member_id == member.id)
    seen: set[frozenset[tuple[str, str]]] = set()
    stored_rows: list[dict[str, str]] = []
    for stored in session.scalars(
        select(m.BenchResult.row).where(m.BenchResult.job_id.in_(job_ids))
    ):
        if isinstance(stored, dict):
            stored_rows.append(_cells(stored))
            seen.add(frozenset(stored_rows[-1].items()))
    # Each run stored or read so far: a run is imported once, however its row is written (H5:
    # 44.6 and 4.46e1; eighteenth sweep: its milliseconds cut). Made at the first row that is
    # not stored as it is: a file imported again needs none.
    runs: RunIndex | None = None
    others: RunIndex | None = None
    planned: list[_Planned] = []
    problems: list[tuple[int, str]] = []
    judge = judge_imports(session, member)
    out = []
    total = len(rows)
    for index, row in enumerate(rows):
        if progress is not None and index % _PROGRESS_EVERY == 0:
            progress(index, total)
        line = index + 2 if lines is None else lines[index]
        server = (row.get("server") or "").strip()
        model = (row.get("model") or "").strip()
        preset = (row.get("preset") or "").strip()
        cells = _cells(row)
        key = frozenset(cells.items())
        if key in seen:
            out.append(ImportedRow(line, server, model, preset, "already imported"))
            continue
        reason = _missing(row)
        if reason is not None:
            out.append(ImportedRow(line, server, model, preset, "skipped", reason))
            continue
        try:
            checked = check_result_row(row)
        except Invalid as exc:
            problems.append((line, str(exc)))
            out.append(ImportedRow(line, server[:32], model[:80], preset[:64], "skipped", str(exc)))
            continue
        if runs is None or others is None:
            runs, others = _stored_runs(stored_rows), _others_runs(session, member)
        run = RowRun.of(cells, checked.lasted_s)
        earlier = runs.same_run(run)
        differs = None if earlier is None else first_difference(earlier.row.cells, cells)
        if earlier is not None and differs is None:  # the same figures written another way
            out.append(ImportedRow(line, server, model, preset, "already imported"))
            continue
        blank = _blank_timings(row, speed=checked.gives_writing_speed)
        if blank is None:
            try:  # a whole run's row holds what its preset fixes (a slice of one does not)
                check_preset_knobs(row, checked.counts)
            except Invalid as exc:
                blank = str(exc)
        if blank is not None:
            problems.append((line, blank))
            out.append(ImportedRow(line, server[:32], model[:80], preset[:64], "skipped", blank))
            continue
        why = runs.other_at_start(run) or runs.overlapping(run) or runs.copied(run)
        if why is None and others.copy_of(run) is not None:
            why = _another_members(cells)
        if earlier is not None:
            why = (
                f"this run ({run_named(cells)}) {earlier.where} with other figures ({differs}): "
                "the row was edited; delete it, or put back what felab bench wrote"
            )
        if why is not None:
            problems.append((line, why))
            out.append(ImportedRow(line, server[:32], model[:80], preset[:64], "skipped", why))
            continue
        runs.add(line, run)
        seen.add(key)
        group = tuple(
            (row.get(c) or "").strip() for c in ("timestamp", "host", "target", "server", "preset")
        )
        verdict: tuple[str, str | None] = ("ok", None)
        if checked.gives_writing_speed and checked.writing_tps_p50 is not None:
            # A file from the member's own disk is checked as a worker's result is: against
            # the speed limit of their machine (flagged rows wait for an instructor's review).
            judged = judge(checked.server, checked.model, checked.writing_tps_p50)
            verdict = (judged.verdict, judged.note or None)
        planned.append(_Planned(line, cells, checked, _when(row, when_now), group, verdict))
        if checked.gives_writing_speed:
            out.append(
                ImportedRow(
                    line,
                    checked.server,
                    checked.model,
                    checked.preset,
                    "recorded",
                    "" if verdict[0] == "ok" else f"{verdict[0]}: {verdict[1]}",
                    tokens_per_s=checked.writing_tps_p50,
                )
            )
        else:
            out.append(
                ImportedRow(
                    line,
                    checked.server,
                    checked.model,
                    checked.preset,
                    "result only",
                    _why_result_only(checked),
                    checked.writing_tps_p50,
                )
            )
    if problems and not skip_invalid:
        raise Invalid(_refusal(problems))
    _store(session, member, planned)
    if progress is not None:
        progress(total, total)
    return ImportReport(tuple(out))


def _store(session: Session, member: m.Member, planned: list[_Planned]) -> None:
    """Write the checked rows in bulk: one job per bench run, its results, its numbers."""
    if not planned:
        return
    runs: dict[tuple[str, ...], list[_Planned]] = {}
    for p in planned:
        runs.setdefault(p.group, []).append(p)
    groups = list(runs)
    job_values = [
        {
            "member_id": member.id,
            "worker_id": None,
            "server": runs[g][0].checked.server,
            "preset": runs[g][0].checked.preset,
            "status": "ready",
            "created_at": runs[g][0].when,
            "finished_at": runs[g][-1].when,
        }
        for g in groups
    ]
    jobs = cast(Table, m.BenchJob.__table__)
    # Core statements on the session's connection: the ORM's bulk path costs more than the
    # insert itself at this size, and nothing here needs objects back.
    if session.get_bind().dialect.name == "sqlite":
        # One statement for all the jobs: felab's SQLite transactions begin IMMEDIATE (the write
        # lock held from the start), so the ids after the largest are this import's to take;
        # RETURNING would cost a statement per row there.
        first = (session.scalar(select(func.max(jobs.c.id))) or 0) + 1
        ids: Sequence[int] = range(first, first + len(job_values))
        session.execute(
            insert(jobs), [{"id": i, **v} for i, v in zip(ids, job_values, strict=True)]
        )
    else:
        ids = (
            session.execute(
                insert(jobs).returning(jobs.c.id, sort_by_parameter_order=True), job_values
            )
            .scalars()
            .all()
        )
    job_of = dict(zip(groups, ids, strict=True))
    results: list[dict[str, Any]] = []
    numbers: list[dict[str, Any]] = []
    for p in planned:
        c, job_id = p.checked, job_of[p.group]
        results.append(
            {
                "job_id": job_id,
                "server": c.server,
                "model": c.model,
                "preset": c.preset,
                "concurrency": c.concurrency,
                "writing_tps_p50": c.writing_tps_p50,
                "ttft_p50_s": c.ttft_p50_s,
                "row": p.row,  # its filled cells
                "created_at": p.when,
            }
        )
        if c.writing_tps_p50 is not None and c.gives_writing_speed:
            numbers.append(
                {
                    "member_id": member.id,
                    "server": c.server,
                    "metric": "writing_tps",
                    "value": c.writing_tps_p50,
                    "unit": "tokens/s",
                    "source": "measured",
                    "model": c.model,
                    "preset": c.preset,
                    "job_id": job_id,
                    "recorded_at": p.when,
                    "verdict": p.verdict[0],
                    "verdict_note": p.verdict[1],
                }
            )
    for start in range(0, len(results), _BATCH):
        session.execute(
            insert(cast(Table, m.BenchResult.__table__)), results[start : start + _BATCH]
        )
    for start in range(0, len(numbers), _BATCH):
        session.execute(insert(cast(Table, m.Number.__table__)), numbers[start : start + _BATCH])
    session.flush()
