"""What a member's numbers add up to for a course day: its fields, its "done when", the table."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.content.calendar import course_day, day_for_number
from felab_core.db import models as m
from felab_core.engine.server_kinds import validate_server
from felab_core.errors import NotFound
from felab_core.numbers.recording import latest_number, speed_limit_for
from felab_core.sizing.speed_limit import (
    Ceiling,
    SpeedCheck,
    check_speed,
)


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
    are equal. Typed-in figures never count (they are listed as entered only), nor do measured
    ones flagged for review until an instructor approves them.
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
            m.Number.server,
            m.Number.preset,
            m.Number.model,
            m.Number.value,
            m.Number.source,
            m.Number.verdict,
        ).where(
            m.Number.member_id == member.id,
            m.Number.metric == metric,
            m.Number.server.in_(servers),
        )
    ).all()
    groups: dict[tuple[str, str], dict[str, float]] = {}
    entered: set[str] = set()
    held: set[str] = set()  # flagged, waiting for an instructor (b B15: they had counted)
    for server, preset, model, value, source, verdict in rows:
        if source != "measured":
            entered.add(server)
            continue
        if verdict == "flagged":
            held.add(server)
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
    waiting = [s for s in missing if s in held]
    if waiting:
        parts.append(
            f"; the measured figures of {', '.join(waiting)} are flagged for review and count "
            "once an instructor approves them"
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


def loaded_day(session: Session, day_number: int) -> m.ContentDay:
    """The day of the loaded content, or NotFound saying which days there are."""
    day = day_for_number(session, day_number)
    if day is not None:
        return day
    numbers = session.scalars(
        select(m.ContentDay.number).where(m.ContentDay.retired.is_(False))
    ).all()
    if not numbers:
        raise NotFound(
            f"day {day_number} is not in the loaded content: load the course with "
            "`felab content load content/`"
        )
    days = sorted(set(numbers))
    held = (
        f"day {days[0]}"
        if len(days) == 1
        else f"days {', '.join(map(str, days))}"
        if len(days) <= 8
        else f"days {days[0]} to {days[-1]}"
    )
    raise NotFound(
        f"day {day_number} is not in the loaded content (it has {held}): give one of those, "
        "or leave --day out for today's"
    )


def field_key_for(session: Session, day_number: int, server: str) -> str | None:
    """The key of the writing-speed field a day asks for on this server; None when the day
    asks for no such figure, NotFound when the day is not in the loaded content."""
    server = validate_server(server)
    day = loaded_day(session, day_number)
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
        if self.measured is not None and self.measured.verdict == "flagged":
            out.append("measured: flagged for review")
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
        if self.measured is not None and self.measured.verdict == "flagged":
            why = self.measured.verdict_note or "it is not what felab expected"
            out.append(
                f"Measured: flagged for an instructor's review ({why}); it does not count for "
                "the day until approved"
            )
        return tuple(out)


@dataclass(frozen=True)
class DayNumbers:
    """A day's "your numbers": its fields, side by side, and its "done when"."""

    day: int
    title: str
    rows: tuple[FieldRow, ...]
    done: DoneWhenStatus


def day_numbers(session: Session, member: m.Member, day_number: int) -> DayNumbers:
    """The member's latest typed and measured figure for each field of the day, checked."""
    day = loaded_day(session, day_number)
    metrics = dict(
        session.execute(
            select(m.NumberField.key, m.NumberField.metric).where(m.NumberField.day_id == day.id)
        ).all()
    )
    rows = []
    for f in day_fields(session, member, day_number):
        metric = metrics.get(f.key, "writing_tps")
        entered = latest_number(session, member, f.server, metric, "entered")
        measured = latest_number(session, member, f.server, metric, "measured")
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
