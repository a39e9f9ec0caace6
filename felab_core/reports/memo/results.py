"""Reading the results CSV `felab bench` wrote: the latest row per server, checked as read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

from felab_core.engine.results import CSV_COLUMNS, UnreadableResults, read_table
from felab_core.errors import Invalid
from felab_core.files import NamedFileError, broken_link, refuse_special
from felab_core.numbers.row_checks import check_result_row
from felab_core.reports.memo.model import _SERVER_ORDER, REQUIRED_COLUMNS, MemoError
from felab_core.sizing.errors import SizingError
from felab_core.sizing.units import (
    as_fraction,
)


def load_results(path: Path) -> list[dict[str, str]]:
    """Read felab's results CSV, refusing a missing file or one with other columns."""
    if (link := broken_link(path)) is not None:
        raise MemoError(f"{path} {link}, with --csv")
    if not path.exists():
        raise MemoError(
            f"{path} does not exist: run `felab bench` first (it appends to "
            "results/01-latency.csv), or pass --csv with the path of your results file"
        )
    try:
        refuse_special(path, what="results CSV")
    except NamedFileError as exc:
        raise MemoError(f"{exc}, with --csv") from None
    try:
        header, rows = read_table(path)
    except OSError as exc:
        raise MemoError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnreadableResults as exc:
        advice = (
            ": it is not the results CSV `felab bench` writes; pass --csv with that file (or "
            "save this one as CSV UTF-8)"
            if exc.not_utf8
            else ""
        )
        raise MemoError(f"{path} {exc}{advice}") from None
    if not header:
        return []
    _check_header(tuple(header), str(path))
    for line, row in enumerate(rows, start=2):
        try:  # the rules `felab numbers import` holds rows to: users -3 is no run either
            check_result_row(row)
        except Invalid as exc:
            raise MemoError(f"{path} line {line}: {exc}; fix or remove the line") from None
    return rows


def _check_header(header: tuple[str, ...], where: str) -> None:
    """Columns are read by name (a spreadsheet may have moved them, as `numbers import` takes
    them): a file without felab's first column is another tool's; one lacking what the memo
    needs is an older felab's."""
    if CSV_COLUMNS[0] not in header:
        raise MemoError(
            f"{where} has other columns than felab's results file (no {CSV_COLUMNS[0]!r}; its "
            f"first is {header[0][:40]!r}); pass --csv with the results/01-latency.csv that "
            "`felab bench` writes"
        )
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if len(missing) > len(REQUIRED_COLUMNS) // 2:  # an older felab lacked a few, never most
        raise MemoError(
            f"{where} is not a results file written by `felab bench`: it lacks "
            f"{len(missing)} of the {len(REQUIRED_COLUMNS)} columns the memo needs "
            f"({', '.join(missing[:4])} ...); pass --csv with the results/01-latency.csv that "
            "`felab bench` writes"
        )
    if missing:
        raise MemoError(
            f"{where} lacks the column(s) {', '.join(missing)} the memo needs (it was written by "
            "an older felab); rerun `felab bench` into a new file with --csv"
        )


def _fraction(row: Mapping[str, str], column: str, where: str) -> Fraction | None:
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        return as_fraction(text)
    except SizingError:
        raise MemoError(f"{where}: {column} is {text!r}, not a number") from None


def _int(row: Mapping[str, str], column: str, where: str) -> int | None:
    value = _fraction(row, column, where)
    if value is None:
        return None
    if value.denominator != 1:
        raise MemoError(f"{where}: {column} is {row[column]!r}, not a whole number")
    return int(value)


def _when(text: str, where: str) -> datetime:
    try:
        stamp = datetime.fromisoformat(text.strip())
    except ValueError:
        raise MemoError(
            f"{where}: timestamp {text!r} is not a date and time; felab bench writes ISO times "
            "such as 2025-06-09T14:02:11+00:00"
        ) from None
    if stamp.tzinfo is None:
        return stamp.replace(tzinfo=UTC)  # felab writes UTC; a hand-made row is taken as UTC
    return stamp.astimezone(UTC)


def _latest(
    rows: Sequence[Mapping[str, str]], source: str
) -> list[tuple[Mapping[str, str], datetime, int, Mapping[str, str] | None]]:
    """The newest row per (host, server) that had a request answered, with how many rows as old
    or older it replaces and the newer row whose requests all failed, if one was passed over (a run
    against a stopped server had hidden the good run before it, sweep 23 s2 L5). A server whose
    every run failed shows its newest.

    One run at several concurrencies writes rows with one timestamp: the one-user row wins (the
    speed limit is about one conversation), else the last one written.
    """
    best: dict[tuple[str, str], tuple[tuple[bool, datetime, bool, int], Mapping[str, str]]] = {}
    newest: dict[tuple[str, str], tuple[tuple[datetime, bool, int], Mapping[str, str]]] = {}
    stamps: dict[tuple[str, str], list[datetime]] = {}
    for index, row in enumerate(rows):
        where = f"{source}, row {index + 2}"
        missing = [c for c in REQUIRED_COLUMNS if c not in row]
        if missing:
            raise MemoError(
                f"{where} lacks {', '.join(missing)}; pass the CSV that `felab bench` writes"
            )
        stamp = _when(row["timestamp"], where)
        single = not (row.get("rate") or "").strip() and _int(row, "concurrency", where) == 1
        answered = _int(row, "ok", where) != 0  # a row without the count is taken as answered
        key = (row["host"], row["server"] or row["target"])
        stamps.setdefault(key, []).append(stamp)
        if key not in best or (answered, stamp, single, index) > best[key][0]:
            best[key] = ((answered, stamp, single, index), row)
        if key not in newest or (stamp, single, index) > newest[key][0]:
            newest[key] = ((stamp, single, index), row)
    latest = []
    for key, (rank, row) in best.items():
        top_rank, top = newest[key]
        failed = top if top_rank[0] > rank[1] else None
        older = sum(stamp <= rank[1] for stamp in stamps[key]) - 1  # the failed: in a note
        latest.append((row, rank[1], older, failed))
    return latest


def _server_rank(server: str) -> tuple[int, str]:
    return (_SERVER_ORDER.index(server) if server in _SERVER_ORDER else len(_SERVER_ORDER), server)
