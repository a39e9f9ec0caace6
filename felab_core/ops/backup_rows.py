"""Rows a backup may hold only as felab itself stores them, each checked with the function felab
uses when it stores that row (twenty-first sweep): a fleet job's preset and params
(felab_core.jobs.stored_job, job_workload), a typed-in speed (parse_speed) and the number it
was stored as, a measured speed and the run (and job) it came from, a machine's chip or
bandwidth (set_hardware's own readers), and (backup_fleet) fleet, model and time rows. Each had
been restored: params [1, 2] then stopped the reconciler every 5 s. An 'ok' figure is not
judged again against today's speed limit: felab keeps its verdict when the limit changes
(twenty-second sweep, b B5), so restore does too.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from felab_core.errors import Invalid
from felab_core.ops.backup_fleet import fleet_rows_problem
from felab_core.text import with_hidden_shown


def open_read_only(path: Path) -> sqlite3.Connection:
    """`path` opened read-only: a backup is read, never changed, by checking it."""
    return sqlite3.connect(f"file:{quote(str(path.absolute()), safe='/')}?mode=ro", uri=True)


def _shown(value: Any) -> str:
    return with_hidden_shown(repr(value))[:60]


def rows_felab_never_stores(source: Path) -> str:
    """The first row felab's own functions refuse to store as it is, in words ("" if none)."""
    from felab_core.db.session import head_revision

    con = open_read_only(source)
    try:
        problem = (
            _fleet_jobs(con)
            or fleet_rows_problem(con)
            or _machines(con)
            or _typed_speeds(con)
            or _measured(con)
        )
        revision = con.execute("SELECT version_num FROM alembic_version").fetchone()
    finally:
        con.close()
    if problem or revision is None or revision[0] != head_revision():
        return problem  # felab's models read the latest schema only (an older one: upgraded)
    return _verdicts(source)


def _has(con: sqlite3.Connection, table: str, *columns: str) -> bool:
    """Whether the backup's schema revision has `table` with `columns` (an older one may not)."""
    held = {row[1] for row in con.execute(f'PRAGMA table_info("{table}")').fetchall()}
    return bool(held) and set(columns) <= held


def _fleet_jobs(con: sqlite3.Connection) -> str:
    """A job sent to a machine (it has a target) with a preset or params felab never queues."""
    from felab_core.jobs.stored_job import stored_job_problem

    if not _has(con, "bench_jobs", "target", "params"):
        return ""
    query = "SELECT id, preset, params FROM bench_jobs WHERE target IS NOT NULL ORDER BY id"
    for job_id, preset, params in con.execute(query):
        try:
            read = json.loads(params) if params is not None else None
        except (TypeError, ValueError):
            continue  # said by the readable-values check, which runs first
        problem = stored_job_problem(preset, read)
        if problem:
            return (
                f"holds a job felab never queues: bench_jobs row {job_id} ({problem}; felab "
                "checks each job with these before queueing it)"
            )
    return ""


def _machines(con: sqlite3.Connection) -> str:
    """A member's chip or bandwidth as `felab numbers machine` would not store it."""
    from felab_core.sizing.errors import SizingError
    from felab_core.sizing.speed_limit import find_chip
    from felab_core.sizing.units import GB, parse_bandwidth

    if not _has(con, "members", "chip", "bandwidth_gb_s"):
        return ""
    query = "SELECT id, chip, bandwidth_gb_s FROM members ORDER BY id"
    for member_id, chip, bandwidth in con.execute(query):
        try:
            if chip is not None and find_chip(str(chip)).name != chip:
                raise SizingError(f"not a chip's name as felab stores it: {_shown(chip)}")
            if bandwidth is not None:
                stored = float(parse_bandwidth(repr(float(bandwidth))) / GB)
                if not math.isclose(stored, bandwidth, rel_tol=1e-9):
                    raise SizingError(f"{_shown(bandwidth)} GB/s reads as {stored!r}")
        except (SizingError, ValueError, TypeError) as exc:
            return f"holds a machine felab never stores: members row {member_id} ({exc})"
    return ""


def _typed_speeds(con: sqlite3.Connection) -> str:
    """A typed-in speed `felab numbers enter` refuses, or stored as another number than typed."""
    from felab_core.numbers.speeds import parse_speed

    if not _has(con, "numbers", "source", "value"):
        return ""
    typed = _has(con, "numbers", "typed_value", "typed_unit")
    columns = "typed_value, typed_unit" if typed else "NULL, NULL"
    query = f"SELECT id, value, {columns} FROM numbers WHERE source = 'entered' ORDER BY id"
    for number_id, value, typed_value, typed_unit in con.execute(query):
        try:
            if typed_value is None:
                speed = parse_speed(float(value))
            else:
                speed = parse_speed(str(typed_value), typed_unit)
        except (Invalid, TypeError, ValueError) as exc:
            return f"holds a figure `felab numbers enter` refuses: numbers row {number_id} ({exc})"
        if not math.isclose(speed.tokens_per_s, float(value), rel_tol=1e-9):
            return (
                f"holds a figure stored as another than typed: numbers row {number_id} (typed "
                f"{_shown(typed_value)} {typed_unit or ''}, which is {speed.tokens_per_s!r} "
                f"tok/s; its value column says {float(value)!r})"
            )
    return ""


def _measured(con: sqlite3.Connection) -> str:
    """A measured speed that is no run's of its job (felab stores each with the run's row,
    checked by check_result_row), and a run's row check_result_row refuses."""
    from felab_core.numbers.row_checks import check_result_row

    if not (
        _has(con, "numbers", "source", "job_id")
        and _has(con, "bench_results", "job_id", "row", "writing_tps_p50")
    ):
        return ""
    orphan = con.execute(  # felab stores a measured figure with its job, and deletes both
        "SELECT id, value FROM numbers WHERE source = 'measured' AND job_id IS NULL "
        "ORDER BY id LIMIT 1"
    ).fetchone()
    if orphan is not None:
        return (
            f"holds a measured figure no run gave: numbers row {orphan[0]} ({orphan[1]!r} "
            "tok/s with no job: felab stores a measured figure with the job that ran it)"
        )
    found = con.execute(
        "SELECT n.id, n.value, n.job_id FROM numbers n WHERE n.source = 'measured' AND "
        "n.job_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM bench_results r WHERE "
        "r.job_id = n.job_id AND r.writing_tps_p50 = n.value) ORDER BY n.id LIMIT 1"
    ).fetchone()
    if found is not None:
        number_id, value, job_id = found
        return (
            f"holds a measured figure no run gave: numbers row {number_id} ({value!r} tok/s; no "
            f"result of job {job_id} says it)"
        )
    query = "SELECT id, row, writing_tps_p50 FROM bench_results ORDER BY id"
    for result_id, row, tps in con.execute(query):
        try:
            read = json.loads(row)
            if not isinstance(read, dict):
                raise Invalid(f"its row {_shown(read)} is not the CSV's columns")
            checked = check_result_row({str(k): str(v) for k, v in read.items()})
        except Invalid as exc:  # before ValueError, which it is
            return f"holds a run felab never stores: bench_results row {result_id} ({exc})"
        except (TypeError, ValueError):
            continue  # said by the readable-values check, which runs first
        if checked.writing_tps_p50 != tps:
            return (
                f"holds a run whose figures disagree: bench_results row {result_id} (its "
                f"writing_tps_p50 column says {tps!r}, its row {checked.writing_tps_p50!r})"
            )
    return ""


@contextmanager
def _session(source: Path) -> Iterator[Session]:
    engine = create_engine("sqlite://", creator=lambda: open_read_only(source))
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()


def _verdicts(source: Path) -> str:
    """A figure ranked "ok" that felab cannot judge against the member's machine as it is.

    A figure judged "ok" is not judged again against today's limit (twenty-second sweep, b B5):
    felab itself keeps a figure's verdict when the member later changes a model's size or the
    chip (`felab numbers model` re-judges only the "unverified" ones), so an untouched backup of
    such a database had been refused as "changed after `felab db backup` wrote it". A forged
    figure is held to its run instead (_measured) or to what `numbers enter` reads
    (_typed_speeds). An 'ok' figure whose member has no machine or no model size for its server
    has no limit behind it at all: felab stores it 'unverified' (sweep 22 b B2), so refused."""
    from felab_core.db import models as m
    from felab_core.numbers.recording import speed_limit_for
    from felab_core.numbers.verdict import Verdict, judge_imports
    from felab_core.sizing.errors import SizingError

    with _session(source) as session:
        judges: dict[int, Callable[[str, str, float], Verdict]] = {}
        limits: dict[tuple[int, str], object] = {}  # a machine and a model size known?
        numbers = session.scalars(
            select(m.Number)
            .where(m.Number.verdict == "ok", m.Number.metric == "writing_tps")
            .order_by(m.Number.id)
        )
        for number in numbers:
            if number.member_id not in judges:
                member = session.get(m.Member, number.member_id)
                if member is None:
                    continue
                judges[number.member_id] = judge_imports(session, member)
            model = (number.model or "") if number.source == "measured" else ""
            try:
                judges[number.member_id](number.server, model, number.value)
                key = (number.member_id, number.server)
                if key not in limits:
                    member = session.get(m.Member, number.member_id)
                    assert member is not None  # judged above
                    limits[key] = speed_limit_for(session, member, number.server)
            except (Invalid, SizingError) as exc:
                return f"holds a figure felab cannot judge: numbers row {number.id} ({exc})"
            if isinstance(limits[key], str):  # migration 0015 moved every such row off
                return (
                    f"holds a figure ranked with no speed limit behind it: numbers row "
                    f"{number.id} ({limits[key]}; felab stores it 'unverified')"
                )
    return ""
