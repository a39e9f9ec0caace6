"""A member's numbers: writing speeds typed in or measured by felab, checked against physics.

A typed figure is read strictly (a positive, finite number in a unit that means tokens per
second), stored as "entered", and set beside the speed limit of the member's machine for the
model file that server runs (felab_core.sizing.speed_limit owns that formula). A figure from a
felab benchmark job (sent by a worker, or imported from the results CSV `felab bench` wrote) is
stored as "measured" with its preset and model, so that only like runs are compared. The day's
"done when" counts measured figures only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.content.calendar import course_day, day_for_number
from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.errors import Invalid, NotFound
from felab_core.people.service import bandwidth_bytes_per_s, validate_server
from felab_core.sizing.errors import SizingError
from felab_core.sizing.speed_limit import (
    Ceiling,
    SpeedCheck,
    bytes_per_token,
    ceiling,
    check_speed,
    find_chip,
)

# No single conversation on any machine in the bandwidth table writes anywhere near this fast;
# a figure above it is a unit mistake (per minute, a throughput total), not a measurement.
MAX_PLAUSIBLE_TPS = 100_000.0

_TPS_UNITS = {
    "tokens/s",
    "token/s",
    "tok/s",
    "t/s",
    "tps",
    "tokens per second",
    "tokens/sec",
    "tok/sec",
    "tokens a second",
}
_MS_PER_TOKEN_UNITS = {"ms/token", "ms/tok", "ms per token"}
_NUMBER = re.compile(
    r"^\s*(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?![\d,.]|[eE][-+]?\d)\s*(.*?)\s*$"
)


TPS_UNIT = "tok/s"
MS_PER_TOKEN_UNIT = "ms/token"


@dataclass(frozen=True)
class Speed:
    """A writing speed in tokens per second, and how it was written: the number as typed
    (digits kept, thousands separators dropped) in its unit, tok/s or ms/token."""

    tokens_per_s: float
    note: str = ""
    typed_value: str = ""
    typed_unit: str = TPS_UNIT

    @property
    def typed(self) -> str:
        return as_typed(self.typed_value, self.typed_unit)


def as_typed(value: str, unit: str) -> str:
    """A figure as the member typed it: '44.6' (tokens per second), '22.4 ms/token'."""
    return value if unit == TPS_UNIT else f"{value} {unit}"


def typed_text(number: m.Number) -> str:
    """How a typed-in number is shown back: as typed, with tokens per second beside a figure
    typed in another unit ('22.4 ms/token (44.6 tok/s)'); a figure recorded before felab kept
    the typing, or a measured one, in tokens per second."""
    tps = f"{number.value:.1f} tok/s"
    if not number.typed_value:
        return tps
    if (number.typed_unit or TPS_UNIT) == TPS_UNIT:
        return f"{number.typed_value} tok/s"
    return f"{as_typed(number.typed_value, number.typed_unit or TPS_UNIT)} ({tps})"


def parse_speed(value: str | float | int, unit: str | None = None) -> Speed:
    """Read a typed writing speed: '44.6', '44.6 tok/s', '22.4 ms/token' (converted).

    Refuses words per second (not the course's measure), unknown units, zero, negatives,
    infinities and figures no single conversation can reach.
    """
    if isinstance(value, bool):
        raise Invalid("expected a number of tokens per second, got a yes/no value")
    if isinstance(value, int | float):
        number = float(value)
        digits = repr(value) if isinstance(value, float) else str(value)
        rest = unit or ""
        if math.isnan(number) or math.isinf(number):
            raise Invalid(f"expected a finite number of tokens per second, got {value}")
        if number <= 0:
            raise Invalid(f"a writing speed must be more than zero tokens per second, got {value}")
    else:
        text = value.strip()
        if text.startswith("-"):
            raise Invalid(f"a writing speed must be more than zero tokens per second, got {text!r}")
        match = _NUMBER.match(text)
        if not match:
            raise Invalid(
                f"could not read {value!r} as a writing speed: write a number of tokens per "
                "second, such as 44.6"
            )
        digits = match.group(1).replace(",", "")
        if len(digits) > 30:
            raise Invalid(f"{digits[:12]}… has more digits than any timing script prints")
        number = float(digits)
        rest = match.group(2) or unit or ""
    unit_text = " ".join(rest.lower().split())
    note = ""
    typed_unit = TPS_UNIT
    if unit_text in ("", *_TPS_UNITS):
        tps = number
    elif unit_text in _MS_PER_TOKEN_UNITS:
        if number <= 0:
            raise Invalid("time per token must be more than zero milliseconds")
        tps = 1000.0 / number
        typed_unit = MS_PER_TOKEN_UNIT
        note = f"{digits} ms per token = {tps:.1f} tokens per second"
    elif "word" in unit_text:
        raise Invalid(
            "felab records tokens per second, not words: a token is about three quarters of a "
            "word, so give the tokens/s figure your timing script printed"
        )
    else:
        raise Invalid(
            f"unknown unit {rest!r}: give tokens per second (tokens/s, tok/s) or "
            "milliseconds per token (ms/token)"
        )
    if tps <= 0:
        raise Invalid(f"a writing speed must be more than zero tokens per second, got {value}")
    if tps > MAX_PLAUSIBLE_TPS:
        raise Invalid(
            f"{tps:,.0f} tokens per second is beyond any single conversation on any machine; "
            "check the unit (per second, not per minute) and that it is one person's speed"
        )
    return Speed(tps, note, digits, typed_unit)


# ----------------------------------------------------------------------------- speed limit


@dataclass(frozen=True)
class LimitComparison:
    """A speed set against the member's machine, or the reason it cannot be."""

    check: SpeedCheck | None
    missing: str = ""

    @property
    def explanation(self) -> str:
        return self.check.explanation if self.check is not None else self.missing


def speed_limit_for(session: Session, member: m.Member, server: str) -> Ceiling | str:
    """The ceiling for one server on the member's machine, or what is missing to compute it."""
    server = validate_server(server)
    bandwidth = bandwidth_bytes_per_s(member)
    if bandwidth is None:
        return (
            "felab does not know your machine yet: set your chip (such as M4 Pro) or its memory "
            "bandwidth to see the speed limit"
        )
    row = session.scalar(
        select(m.MemberServer).where(
            m.MemberServer.member_id == member.id, m.MemberServer.server == server
        )
    )
    if row is None or not row.model_bytes:
        return (
            f"felab does not know the size of the model file {server} runs: record it (such as "
            "4.9GB) to see the speed limit"
        )
    chip = find_chip(member.chip) if member.chip else None
    try:
        reads = bytes_per_token(
            row.model_bytes, weights_note=f"{row.model}, a {row.model_bytes / 1e9:.1f} GB file"
        )
        return ceiling(bandwidth, reads, chip)
    except SizingError as exc:
        return str(exc)


def compare_with_limit(
    session: Session, member: m.Member, server: str, tokens_per_s: float
) -> LimitComparison:
    limit = speed_limit_for(session, member, server)
    if isinstance(limit, str):
        return LimitComparison(None, limit)
    return LimitComparison(check_speed(Fraction(repr(tokens_per_s)), limit))


# ----------------------------------------------------------------------------- recording


@dataclass(frozen=True)
class Recorded:
    number: m.Number
    comparison: LimitComparison
    note: str = ""
    unchanged: bool = False  # the same figure as the latest typed in: nothing new was stored


def _same_typing(latest: m.Number, speed: Speed) -> bool:
    """Whether a figure is the one typed last time: the same number (22.40 is 22.4) in the
    same unit; for a figure stored before felab kept the typing, the same text it was shown
    back as."""
    if latest.typed_value:
        try:
            same = Decimal(latest.typed_value) == Decimal(speed.typed_value)
        except InvalidOperation:
            same = latest.typed_value == speed.typed_value
        return same and (latest.typed_unit or TPS_UNIT) == speed.typed_unit
    return speed.typed_unit == TPS_UNIT and f"{latest.value:g}" == speed.typed_value


def record_entered(
    session: Session,
    member: m.Member,
    server: str,
    value: str | float | int,
    *,
    unit: str | None = None,
    field_key: str | None = None,
    skip_unchanged: bool = False,
    now: datetime | None = None,
) -> Recorded:
    """Store a writing speed the member typed, checked, and compared with the speed limit.

    Kept as typed (the number and its unit) beside its value in tokens per second, so it is
    shown back exactly as typed and never drifts through a conversion. `skip_unchanged`: a
    form sent again with the figure it showed stores nothing (`Recorded.unchanged`)."""
    server = validate_server(server)
    metric = "writing_tps"
    if field_key is not None:
        fld = session.scalar(select(m.NumberField).where(m.NumberField.key == field_key))
        if fld is None:
            raise NotFound(f"no numbers field {field_key!r} in the loaded content")
        if fld.server != server:
            raise Invalid(f"field {field_key!r} asks for {fld.server}, not {server}")
        metric = fld.metric
    if metric != "writing_tps":
        raise Invalid(f"only writing speeds can be typed in so far (field asks for {metric})")
    speed = parse_speed(value, unit)
    if skip_unchanged:
        latest = _latest(session, member, server, metric, "entered")
        if latest is not None and _same_typing(latest, speed):
            return Recorded(
                latest,
                compare_with_limit(session, member, server, latest.value),
                speed.note,
                unchanged=True,
            )
    model = session.scalar(
        select(m.MemberServer.model).where(
            m.MemberServer.member_id == member.id, m.MemberServer.server == server
        )
    )
    number = m.Number(
        member_id=member.id,
        server=server,
        metric=metric,
        value=speed.tokens_per_s,
        unit="tokens/s",
        typed_value=speed.typed_value,
        typed_unit=speed.typed_unit,
        source="entered",
        model=model,
        field_key=field_key,
        recorded_at=now or utcnow(),
    )
    session.add(number)
    session.flush()
    return Recorded(
        number, compare_with_limit(session, member, server, speed.tokens_per_s), speed.note
    )


def create_job(
    session: Session,
    member: m.Member,
    server: str,
    preset: str,
    *,
    worker: m.Worker | None = None,
    now: datetime | None = None,
) -> m.BenchJob:
    """A queued benchmark job (the worker fleet sends it and ingests its result)."""
    job = m.BenchJob(
        member_id=member.id,
        worker_id=worker.id if worker is not None else None,
        server=validate_server(server),
        preset=preset,
        status="queued",
        created_at=now or utcnow(),
    )
    session.add(job)
    session.flush()
    return job


def _float(row: Mapping[str, str], name: str) -> float | None:
    text = (row.get(name) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise Invalid(f"result column {name} holds {text!r}, not a number") from None
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class ResultRow:
    """The headline figures of one results-CSV row, checked."""

    server: str
    model: str
    preset: str
    concurrency: int
    writing_tps_p50: float | None
    ttft_p50_s: float | None

    @property
    def gives_writing_speed(self) -> bool:
        """Whether the row is one person's writing speed (a "measured" number)."""
        tps = self.writing_tps_p50
        return tps is not None and 0 < tps <= MAX_PLAUSIBLE_TPS and self.concurrency == 1


def check_result_row(row: Mapping[str, str]) -> ResultRow:
    """Read a row with the results CSV's columns; Invalid says what is wrong with it."""
    for name in ("server", "model", "preset", "concurrency"):
        if not (row.get(name) or "").strip():
            raise Invalid(f"the result row has no {name}; it must carry the CSV's columns")
    server = validate_server(row["server"])
    try:
        concurrency = int(row["concurrency"])
    except ValueError:
        raise Invalid(f"concurrency {row['concurrency']!r} is not a whole number") from None
    return ResultRow(
        server=server,
        model=row["model"].strip(),
        preset=row["preset"].strip(),
        concurrency=concurrency,
        writing_tps_p50=_float(row, "writing_tps_p50"),
        ttft_p50_s=_float(row, "ttft_p50_s"),
    )


def record_measured(
    session: Session,
    job: m.BenchJob,
    row: Mapping[str, str],
    *,
    verdict: tuple[str, str] = ("ok", ""),
    now: datetime | None = None,
) -> m.BenchResult:
    """Store one run of a job (a row with the results CSV's columns) and its measured speed,
    with the verdict on it (felab_core.numbers.verdict: "ok", "unverified" or "flagged").

    Only a trusted ingest calls this: the worker fleet, for a job assigned to the worker that
    sent the row, or `import_results`, for a results file the member's own terminal holds.
    """
    checked = check_result_row(row)
    server = checked.server
    if server != job.server and job.server != "openai":
        raise Invalid(f"job {job.id} asked for {job.server} but the row measured {server}")
    concurrency = checked.concurrency
    when = now or utcnow()
    result = m.BenchResult(
        job_id=job.id,
        server=server,
        model=checked.model,
        preset=checked.preset,
        concurrency=concurrency,
        writing_tps_p50=checked.writing_tps_p50,
        ttft_p50_s=checked.ttft_p50_s,
        row=dict(row),
        created_at=when,
    )
    session.add(result)
    tps = result.writing_tps_p50
    if tps is not None and checked.gives_writing_speed:
        session.add(
            m.Number(
                member_id=job.member_id,
                server=server,
                metric="writing_tps",
                value=tps,
                unit="tokens/s",
                source="measured",
                model=result.model,
                preset=result.preset,
                job_id=job.id,
                recorded_at=when,
                verdict=verdict[0],
                verdict_note=verdict[1] or None,
            )
        )
    job.status = "ready"
    job.finished_at = when
    session.flush()
    return result


# ----------------------------------------------------------------------------- the day's fields


@dataclass(frozen=True)
class FieldView:
    """A "your numbers" field with the member's latest figure and the course's sample."""

    key: str
    server: str
    label: str
    unit: str
    help: str | None
    hint: str | None
    example: float | None
    latest: m.Number | None


def day_fields(session: Session, member: m.Member, day_number: int) -> list[FieldView]:
    """The fields a day asks for (from its pack), each with the member's latest figure."""
    day = day_for_number(session, day_number)
    if day is None:
        return []
    fields = session.scalars(
        select(m.NumberField)
        .where(m.NumberField.day_id == day.id, m.NumberField.retired.is_(False))
        .order_by(m.NumberField.position)
    ).all()
    out = []
    for f in fields:
        latest = session.scalar(
            select(m.Number)
            .where(
                m.Number.member_id == member.id,
                m.Number.server == f.server,
                m.Number.metric == f.metric,
            )
            .order_by(m.Number.recorded_at.desc(), m.Number.id.desc())
            .limit(1)
        )
        body = f.body or {}
        out.append(
            FieldView(
                key=f.key,
                server=f.server,
                label=f.label,
                unit=f.unit,
                help=body.get("help"),
                hint=body.get("hint"),
                example=body.get("example"),
                latest=latest,
            )
        )
    return out


@dataclass(frozen=True)
class DoneWhenStatus:
    """Whether the day's measurement check passes, and what is still missing."""

    done: bool
    text: str
    servers: tuple[str, ...]
    preset: str | None = None
    model: str | None = None
    best: dict[str, float] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    entered_only: tuple[str, ...] = ()
    message: str = ""


def done_when(session: Session, member: m.Member, day_number: int) -> DoneWhenStatus:
    """The day's "done when": each listed server measured by felab, same preset, same model.

    Servers name one model differently (llama3.1:8b, Llama-3.1-8B-Instruct-4bit): runs count as
    the same model when the member gave those servers' models the same label, or when the names
    are equal. Typed-in figures never count: they are listed as entered only.
    """
    day = day_for_number(session, day_number)
    spec = (day.done_when or {}) if day is not None else {}
    servers = tuple(spec.get("measured") or ())
    text = spec.get("text", "")
    if not servers:
        return DoneWhenStatus(True, text, (), message="nothing to measure today")
    metric = spec.get("metric", "writing_tps")
    labels = {
        (s.server, s.model): s.model_label or s.model
        for s in session.scalars(
            select(m.MemberServer).where(m.MemberServer.member_id == member.id)
        )
    }
    rows = session.execute(
        select(
            m.Number.server, m.Number.preset, m.Number.model, m.Number.value, m.Number.source
        ).where(
            m.Number.member_id == member.id,
            m.Number.metric == metric,
            m.Number.server.in_(servers),
        )
    ).all()
    groups: dict[tuple[str, str], dict[str, float]] = {}
    entered: set[str] = set()
    for server, preset, model, value, source in rows:
        if source != "measured":
            entered.add(server)
            continue
        key = (preset or "", labels.get((server, model or ""), model or ""))
        best = groups.setdefault(key, {})
        best[server] = max(best.get(server, 0.0), value)
    complete = [(k, v) for k, v in groups.items() if set(v) >= set(servers)]
    if complete:
        (preset, label), best = max(complete, key=lambda kv: len(kv[1]))
        return DoneWhenStatus(
            True,
            text,
            servers,
            preset,
            label,
            best,
            message="all measured with one preset and model",
        )
    (preset_, label_), best_ = max(
        groups.items(), key=lambda kv: len(kv[1]), default=(("", ""), {})
    )
    missing = tuple(s for s in servers if s not in best_)
    measured_any = {s for v in groups.values() for s in v}
    entered_only = tuple(s for s in servers if s in entered and s not in measured_any)
    parts = [f"still to measure with felab: {', '.join(missing)}"]
    if best_:
        parts.append(f"(so far {', '.join(sorted(best_))} with preset {preset_}, model {label_})")
    elsewhere = [s for s in missing if s in measured_any]
    if elsewhere:
        parts.append(
            f"; {', '.join(elsewhere)} measured with another preset or model name: runs count "
            "together when they share a preset and each server's model carries the same label"
        )
    if entered_only:
        parts.append(
            f"; typed-in figures for {', '.join(entered_only)} are kept but do not count: run "
            "`felab bench` on them"
        )
    return DoneWhenStatus(
        False,
        text,
        servers,
        preset_ or None,
        label_ or None,
        best_,
        missing,
        entered_only,
        " ".join(parts).replace(" ;", ";"),
    )


# ----------------------------------------------------------------------------- a day's table


def numbers_day(session: Session, member: m.Member, now: datetime) -> int | None:
    """The day whose numbers to show by default: the latest one up to the member's course day
    that asks for numbers, else the first that does (a learner still on Day 1 sees Day 2)."""
    days = session.scalars(
        select(m.ContentDay.number)
        .join(m.NumberField, m.NumberField.day_id == m.ContentDay.id)
        .where(m.ContentDay.retired.is_(False), m.NumberField.retired.is_(False))
        .distinct()
        .order_by(m.ContentDay.number)
    ).all()
    if not days:
        return None
    today = course_day(member.cohort, now)
    reached = [d for d in days if d <= today]
    return reached[-1] if reached else days[0]


def field_key_for(session: Session, day_number: int, server: str) -> str | None:
    """The key of the writing-speed field a day asks for on this server, or None."""
    server = validate_server(server)
    day = day_for_number(session, day_number)
    if day is None:
        return None
    return session.scalar(
        select(m.NumberField.key)
        .where(
            m.NumberField.day_id == day.id,
            m.NumberField.server == server,
            m.NumberField.metric == "writing_tps",
            m.NumberField.retired.is_(False),
        )
        .order_by(m.NumberField.position)
        .limit(1)
    )


_VERDICT_FLAGS = {
    "impossible": "above the speed limit",
    "very close to the limit": "very close to the limit",
    "well below the limit": "well below the limit",
}


@dataclass(frozen=True)
class FieldRow:
    """One field of a day: the latest typed and measured figures, each against the limit."""

    field: FieldView
    entered: m.Number | None
    measured: m.Number | None
    limit: Ceiling | str  # the ceiling, or what felab needs to know to compute it
    entered_check: SpeedCheck | None
    measured_check: SpeedCheck | None

    @property
    def flags(self) -> tuple[str, ...]:
        """Short warnings: a figure outside the usual 55-85 % of the limit, or typed in only."""
        out = []
        for what, check in (("entered", self.entered_check), ("measured", self.measured_check)):
            if check is not None and check.verdict in _VERDICT_FLAGS:
                out.append(f"{what}: {_VERDICT_FLAGS[check.verdict]}")
        if self.entered is not None and self.measured is None:
            out.append("typed in only")
        return tuple(out)

    @property
    def notes(self) -> tuple[str, ...]:
        """The explanations behind the flags (and the limit's missing piece, if any)."""
        out = []
        if isinstance(self.limit, str) and (self.entered or self.measured):
            out.append(self.limit)
        for what, check in (("Entered", self.entered_check), ("Measured", self.measured_check)):
            if check is not None and check.verdict in _VERDICT_FLAGS:
                out.append(f"{what}: {check.explanation}")
        return tuple(out)


@dataclass(frozen=True)
class DayNumbers:
    """A day's "your numbers": its fields, side by side, and its "done when"."""

    day: int
    title: str
    rows: tuple[FieldRow, ...]
    done: DoneWhenStatus


def _latest(
    session: Session, member: m.Member, server: str, metric: str, source: str
) -> m.Number | None:
    return session.scalar(
        select(m.Number)
        .where(
            m.Number.member_id == member.id,
            m.Number.server == server,
            m.Number.metric == metric,
            m.Number.source == source,
        )
        .order_by(m.Number.recorded_at.desc(), m.Number.id.desc())
        .limit(1)
    )


def day_numbers(session: Session, member: m.Member, day_number: int) -> DayNumbers:
    """The member's latest typed and measured figure for each field of the day, checked."""
    day = day_for_number(session, day_number)
    if day is None:
        raise NotFound(
            f"day {day_number} is not in the loaded content: load the course with "
            "`felab content load content/`"
        )
    metrics = dict(
        session.execute(
            select(m.NumberField.key, m.NumberField.metric).where(m.NumberField.day_id == day.id)
        ).all()
    )
    rows = []
    for f in day_fields(session, member, day_number):
        metric = metrics.get(f.key, "writing_tps")
        entered = _latest(session, member, f.server, metric, "entered")
        measured = _latest(session, member, f.server, metric, "measured")
        limit = speed_limit_for(session, member, f.server)
        checks = [
            check_speed(Fraction(repr(n.value)), limit)
            if n is not None and not isinstance(limit, str)
            else None
            for n in (entered, measured)
        ]
        rows.append(FieldRow(f, entered, measured, limit, checks[0], checks[1]))
    return DayNumbers(day_number, day.title, tuple(rows), done_when(session, member, day_number))


# ----------------------------------------------------------------------------- importing a CSV

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
