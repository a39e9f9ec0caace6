"""Which `felab bench` run a results row is, however its cells are written: the import stores
each run once, refuses one run given other figures, and refuses one start given two servers.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from felab_core.redact import redact

#: What tells one run from another in a results CSV: a `felab bench` run on one target (its
#: start time, to the second; the machine; the target's name) of one server, model and preset
#: times one load per row: a concurrency (a sweep gives each once) or a rate. Everything else a
#: row says (the seed, the figures, the versions) is what that run measured.
RUN_COLUMNS = ("timestamp", "host", "target", "server", "model", "preset", "concurrency", "rate")
#: What one start on one target has once, whatever its loads: `felab bench` names the server it
#: found, the model and the preset once a target (a2 H9: one start stored as vLLM and Ollama).
_ONE_A_START = ("server", "model", "preset")
_FRACTION = re.compile(r":\d\d[.,](\d+)")
#: What a run measured, each written to 6 significant digits (engine.results): no two honest
#: runs give all of them alike, however alike the runs (a rerun's clock differs in microseconds).
_LATENCIES = (
    "ttft_p50_s", "ttft_p95_s", "tpot_p50_s", "tpot_p95_s", "itl_p50_s", "itl_p95_s",
    "e2e_p50_s", "e2e_p95_s",
)  # fmt: skip
#: The fewest latencies, of different values and not 0, two rows must both give alike for one
#: to be the other's copy: a run with no answered request gives none, and two such runs are
#: alike honestly; a run of one-chunk answers gives one value four times (its TTFT is its E2E).
_LEAST_LATENCIES_ALIKE = 2
#: How far two starts on one target may seem to overlap and still be one run after another:
#: their milliseconds, a length read back from 6 digits, the wall clock against the run's own.
_OVERLAP_SLACK_S, _OVERLAP_SLACK_SHARE = 0.05, 0.01


@functools.lru_cache(maxsize=4096)
def _same_text(text: str) -> str:
    """A name as it reads: ｍｌｘ, MLX and mlx are one name (a file names a few, many times)."""
    if text.isascii():  # NFKC leaves ASCII as it is, and casefolds it as lower() does
        return text.lower()
    return unicodedata.normalize("NFKC", text).casefold()


@functools.lru_cache(maxsize=4096)
def _instant(stamp: str) -> tuple[str, float] | None:
    """A start time to the second, in UTC, and as seconds since 1970 (None: not a time with
    its zone). felab writes milliseconds, and a spreadsheet may cut them (a2 H5: the same run
    stored again)."""
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.astimezone(UTC).replace(microsecond=0).isoformat(), when.timestamp()


def _lasted(cells: Mapping[str, str]) -> float | None:
    """A stored row's run length (ok / request_tps), None when it gives none."""
    try:
        ok, request_tps = int(_cell(cells, "ok")), float(_cell(cells, "request_tps"))
    except ValueError:
        return None
    return ok / request_tps if ok > 0 and 0 < request_tps < float("inf") else None


def _fraction(stamp: str) -> str | None:
    """The fraction of a second a start time gives, as written (None: it gives none)."""
    written = _FRACTION.search(stamp)
    return written[1].rstrip("0") if written else None


def _cell(row: Mapping[str, str], column: str) -> str:
    return (row.get(column) or "").strip()


def _same_instant(one: str | None, other: str | None) -> bool:
    """Two times of one second are one instant unless both give its fraction, and differ."""
    return one is None or other is None or one == other


def _figure(text: str) -> float | str:
    """A cell as the figure it says: 44.6, 4.46e1, ٤٤.٦ and ４４.６ are one number."""
    try:
        return float(text)
    except ValueError:
        return text


def first_difference(before: Mapping[str, str], now: Mapping[str, str]) -> str | None:
    """The first figure two rows of one run both give and disagree on, as 'column was, is';
    None when they agree (a column one of them leaves blank says nothing)."""
    for column, text in now.items():
        if column in RUN_COLUMNS or column not in before:
            continue
        if _figure(before[column]) != _figure(text):
            return f"{column} {redact(before[column])[:20]!r} there, {redact(text)[:20]!r} here"
    return None


def run_named(row: Mapping[str, str]) -> str:
    """The run a row is, as a student finds it in the file (a stored row's cells masked: one
    imported before felab refused `user:password@` with no scheme may hold one)."""
    stamp, host, target, users, rate = (
        redact(_cell(row, c))[:40] for c in ("timestamp", "host", "target", "concurrency", "rate")
    )
    load = f"rate {rate}/s" if rate else f"concurrency {users}"
    return f"timestamp {stamp or '(none)'}, host {host}, target {target}, {load}"


@dataclass(frozen=True)
class RowRun:
    """A row's cells and what tells its run, read once (a 60,000-row import looks each row up
    twice and files it once): the same instant in another time zone, a name in capitals or
    full-width letters, 1 or ١ users, a rate of 2 or 2.0 are one run."""

    cells: Mapping[str, str]
    #: The run, to the second: RUN_COLUMNS as read.
    run: tuple[str, ...]
    #: The `felab bench` start on one target (None: the row gives no time zone to read).
    start: tuple[str, ...] | None
    #: What a start names once (_ONE_A_START), as read.
    named: tuple[str, ...]
    fraction: str | None
    #: When the run began (seconds since 1970; None: no time with its zone) and how long it
    #: lasted (ok / request_tps; None: the row gives neither).
    began: float | None = None
    lasted: float | None = None
    #: What the run measured, as the copy check reads it (latencies()): each latency the row
    #: gives, not 0, as a number.
    measured: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, cells: Mapping[str, str], lasted: float | None = None) -> RowRun:
        """`lasted`: the run's length when the row's figures were read already (a new row)."""
        stamp, host, target, server, model, preset, users, rate = [
            _cell(cells, c) for c in RUN_COLUMNS
        ]
        try:
            users = str(int(users))
            rate = repr(float(rate)) if rate else ""
        except ValueError:
            pass
        instant = _instant(stamp)
        second, began = (None, None) if instant is None else instant
        host, target = _same_text(host), _same_text(target)
        named = (_same_text(server), _same_text(model), _same_text(preset))
        run = (second or stamp, host, target, *named, users, rate)
        start = None if second is None else (second, host, target)
        if lasted is None and began is not None:
            lasted = _lasted(cells)
        measured = latencies(cells)
        return cls(cells, run, start, named, _fraction(stamp), began, lasted, measured)


@dataclass(frozen=True)
class Seen:
    """A run already stored (line None) or on an earlier line of the file, and its row."""

    line: int | None
    row: RowRun

    @property
    def where(self) -> str:
        return "was already imported" if self.line is None else f"is on line {self.line}"


@dataclass
class _Start:
    """One `felab bench` start on one target: its first row, and how long its runs (one a
    load, one after another) lasted together at the least."""

    seen: Seen
    lasted: float


def _one_start(one: RowRun, other: RowRun) -> bool:
    """Two rows begin together: the same instant, or one second and a time cut to it."""
    return (
        one.start is not None
        and other.start is not None
        and one.start[0] == other.start[0]
        and _same_instant(one.fraction, other.fraction)
    )


@dataclass
class RunIndex:
    """The runs stored or read so far, by run, by start, and by when each target was busy."""

    _runs: dict[tuple[str, ...], list[Seen]] = field(default_factory=dict)
    _starts: dict[tuple[str, ...], list[Seen]] = field(default_factory=dict)
    #: Each (host, target)'s starts: their instants in order, and each start.
    _busy: dict[tuple[str, ...], tuple[list[float], dict[float, _Start]]] = field(
        default_factory=dict
    )
    #: The runs by each latency they measured (RowRun.measured): a copy is looked for among
    #: these, whatever its host, target, preset, users or throughputs say (sweep 22 B1: one
    #: digit of output_tps changed, or the host renamed, had passed as another run).
    _copies: dict[tuple[str, float], list[Seen]] = field(default_factory=dict)

    def add_measured(self, seen: Seen) -> None:
        """Keep a run's figures for the copy check only (another member's stored run)."""
        if len({value for _, value in seen.row.measured}) >= _LEAST_LATENCIES_ALIKE:
            for figure in seen.row.measured:
                self._copies.setdefault(figure, []).append(seen)

    def add(self, line: int | None, row: RowRun) -> None:
        seen = Seen(line, row)
        self._runs.setdefault(row.run, []).append(seen)
        self.add_measured(seen)
        if row.start is not None:
            self._starts.setdefault(row.start, []).append(seen)
        if row.start is not None and row.began is not None:
            began, starts = self._busy.setdefault(row.start[1:], ([], {}))
            start = starts.get(row.began)
            if start is None:
                if began and began[-1] > row.began:
                    bisect.insort(began, row.began)
                else:  # a file in time order: appended
                    began.append(row.began)
                start = starts[row.began] = _Start(seen, 0.0)
            start.lasted += row.lasted or 0.0

    def overlapping(self, row: RowRun) -> str | None:
        """Why this row cannot be a run of its own (A2-7: one run's row copied 50 times, its
        start moved 1 ms each): `felab bench` times one target's runs one after another, so a
        start on the same host and target inside another's runs is that run with its time
        changed (None: it begins after the one before ended, and ends before the next)."""
        if row.start is None or row.began is None:
            return None
        busy = self._busy.get(row.start[1:])
        if busy is None:
            return None
        began, starts = busy
        at = bisect.bisect_left(began, row.began)
        mine = starts.get(row.began)
        lasted = (0.0 if mine is None else mine.lasted) + (row.lasted or 0.0)
        if at > 0:
            before = starts[began[at - 1]]
            if not _one_start(before.seen.row, row) and _overlap(
                began[at - 1], before.lasted, row.began
            ):
                return _inside(row, before, row.began - began[at - 1])
        after_at = at + (mine is not None)
        if after_at < len(began):
            after = starts[began[after_at]]
            if not _one_start(after.seen.row, row) and _overlap(row.began, lasted, began[after_at]):
                return _runs_into(row, after, lasted, began[after_at] - row.began)
        return None

    def copy_of(self, row: RowRun) -> Seen | None:
        """The run this row is a copy of (twentieth sweep: a run's row copied with its start
        moved back by the run's length, or a day, passed the overlap check): every latency
        both give is that run's, to every digit felab writes, and at least two of other
        values, not 0 (None: no run's are). Its host, target, preset, users and throughputs
        are not compared: a copy edits those freely, and no two runs time their requests
        alike to 6 digits."""
        if len({value for _, value in row.measured}) < _LEAST_LATENCIES_ALIKE:
            return None
        looked: set[int] = set()
        for figure in row.measured:
            for seen in self._copies.get(figure, ()):
                if id(seen) not in looked:
                    looked.add(id(seen))
                    if _alike(seen.row.measured, row.measured):
                        return seen
        return None

    def copied(self, row: RowRun) -> str | None:
        """Why this row is a copy of a run seen (None: it is none's): copy_of."""
        seen = self.copy_of(row)
        if seen is None:
            return None
        return (
            f"this run ({run_named(row.cells)}) measured every figure the run that "
            f"{seen.where} ({run_named(seen.row.cells)}) did, to all digits: no two runs do, "
            "so it is that run copied with its time, host or throughputs changed; delete the "
            "copy, or put back what felab bench wrote"
        )

    def same_run(self, row: RowRun) -> Seen | None:
        """The run this row is, if seen: the same identity at the same instant."""
        runs = self._runs.get(row.run, [])
        return next((s for s in runs if _same_instant(s.row.fraction, row.fraction)), None)

    def other_at_start(self, row: RowRun) -> str | None:
        """Why this row cannot be of its start: a row of the same start on the same target
        names another server, model or preset (None: none does)."""
        if row.start is None:
            return None
        for seen in self._starts.get(row.start, []):
            if seen.row.named != row.named and _same_instant(seen.row.fraction, row.fraction):
                server, model, preset = (_cell(seen.row.cells, c)[:40] for c in _ONE_A_START)
                return (
                    f"this run ({run_named(row.cells)}) {seen.where} as {server} {model} under "
                    f"preset {preset}: one felab bench start on one target times one server, "
                    "one model and one preset; the row was edited: delete it, or put back "
                    "what felab bench wrote"
                )
        return None


def latencies(cells: Mapping[str, str]) -> tuple[tuple[str, float], ...]:
    """The latencies a row gives, not 0, each as a number (44.6 and 4.46e1 alike)."""
    out = []
    for column in _LATENCIES:
        text = _cell(cells, column)
        if text:
            with contextlib.suppress(ValueError):
                value = float(text)
                if value and value == value:  # not 0, not NaN
                    out.append((column, value))
    return tuple(out)


def _alike(before: tuple[tuple[str, float], ...], now: tuple[tuple[str, float], ...]) -> bool:
    """Whether two rows measured the same latencies: each one both give is one number, and
    at least two of other values (_LEAST_LATENCIES_ALIKE) are."""
    mine = dict(before)
    shared = {column: value for column, value in now if column in mine}
    if any(mine[column] != value for column, value in shared.items()):
        return False
    return len(set(shared.values())) >= _LEAST_LATENCIES_ALIKE


def _overlap(began: float, lasted: float, next_began: float) -> bool:
    slack = _OVERLAP_SLACK_S + _OVERLAP_SLACK_SHARE * lasted
    return began + lasted > next_began + slack


_ONE_AFTER_ANOTHER = (
    "one felab bench on one target times its runs one after another, so this is that run "
    "copied with its time changed; delete the copy, or put back what felab bench wrote"
)


def _inside(row: RowRun, before: _Start, after_s: float) -> str:
    return (
        f"this run ({run_named(row.cells)}) begins {after_s:.3g} s after the run that "
        f"{before.seen.where} ({run_named(before.seen.row.cells)}), which lasted about "
        f"{before.lasted:.4g} s on the same host and target (ok / request_tps): "
        f"{_ONE_AFTER_ANOTHER}"
    )


def _runs_into(row: RowRun, after: _Start, lasted: float, before_s: float) -> str:
    return (
        f"this run ({run_named(row.cells)}) lasted about {lasted:.4g} s (ok / request_tps), "
        f"but the run that {after.seen.where} ({run_named(after.seen.row.cells)}) began "
        f"{before_s:.3g} s after it on the same host and target: {_ONE_AFTER_ANOTHER}"
    )
