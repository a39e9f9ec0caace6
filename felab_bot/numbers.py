"""What `/numbers` asks and says, and the service calls behind it: no Discord import here.

The fields come from the day's content pack (Day 2: Ollama, llama.cpp and MLX writing speed),
each with the course's sample figure as its placeholder. Every value goes through
felab_core.numbers.record_entered: a value it refuses is named with the reason and
echoed back so the member can paste it again; a value above the speed limit is kept but flagged.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from felab_bot.drills import fit
from felab_bot.who import Who, member_of
from felab_core.db import models as m
from felab_core.errors import ServiceError
from felab_core.numbers.progress import DayNumbers, day_fields, day_numbers, numbers_day
from felab_core.numbers.recording import record_entered
from felab_core.numbers.speeds import as_typed, typed_text
from felab_core.sizing.units import about_text

MODAL_FIELDS = 5  # Discord: at most five text inputs in one modal
LABEL_MAX = 45  # Discord: a text input's label
PLACEHOLDER_MAX = 100


@dataclass(frozen=True)
class FormField:
    key: str
    server: str
    label: str
    placeholder: str
    current: str  # the member's latest typed figure, to prefill; "" when none


@dataclass(frozen=True)
class NumbersForm:
    day: int | None
    fields: list[FormField]
    message: str = ""  # when there is nothing to ask


def shown_as_typed(number: m.Number) -> str:
    """A typed-in figure as the form shows it back: exactly as typed ('22.4 ms/token'), so
    sending the form again unchanged reads as the same figure."""
    if number.typed_value:
        return as_typed(number.typed_value, number.typed_unit or "tok/s")
    return f"{number.value:g}"


def numbers_form(session: Session, who: Who, now: datetime) -> NumbersForm:
    """The modal's fields: the day the member is on that asks for numbers (Day 2 at first)."""
    member = member_of(session, who, now)
    day = numbers_day(session, member, now)
    if day is None:
        return NumbersForm(None, [], "No day in the loaded course asks for numbers yet.")
    out = []
    for f in day_fields(session, member, day)[:MODAL_FIELDS]:
        if f.example is not None:
            sample = f"e.g. {f.example:g} tokens/s"
        elif f.hint and len(f.hint) <= PLACEHOLDER_MAX:
            sample = f.hint
        else:
            sample = "tokens per second, such as 44.6"
        current = ""
        if f.latest is not None and f.latest.source == "entered":
            current = shown_as_typed(f.latest)
        out.append(
            FormField(f.key, f.server, f.label[:LABEL_MAX], sample[:PLACEHOLDER_MAX], current)
        )
    if not out:
        return NumbersForm(day, [], f"Day {day} asks for no numbers.")
    return NumbersForm(day, out)


def enter_numbers(session: Session, who: Who, values: dict[str, str], now: datetime) -> str:
    """Record each filled field (by key); refused values are named, with what was typed.

    Each value is recorded in its own savepoint, so one bad value never loses the good ones.
    """
    member = member_of(session, who, now)
    day = numbers_day(session, member, now)
    fields = {f.key: f for f in day_fields(session, member, day)} if day is not None else {}
    lines: list[str] = []
    refused: list[str] = []
    unchanged: list[str] = []
    for key, raw in values.items():
        text = raw.strip()
        if not text:
            continue
        f = fields.get(key)
        if f is None:
            refused.append(f"{key}: not a field of today's numbers")
            continue
        try:
            with session.begin_nested():
                out = record_entered(
                    session, member, f.server, text, field_key=key, skip_unchanged=True, now=now
                )
        except ServiceError as exc:
            refused.append(f"**{f.label}**: `{fit(text, 40)}` was not recorded: {exc}")
            continue
        if out.unchanged:
            unchanged.append(f"**{f.label}** ({typed_text(out.number)})")
            continue
        line = f"**{f.label}**: recorded {typed_text(out.number)}"
        if out.note:
            line += f" ({out.note})"
        check = out.comparison.check
        if check is not None and check.impossible:
            line += f"\n⚠ Kept, but flagged: {check.explanation}"
        elif check is not None:
            line += f". {check.explanation}"
        lines.append(line)
    if unchanged and not lines and not refused:
        return fit(f"Nothing changed, so nothing new was recorded: {', '.join(unchanged)}.")
    if unchanged:
        lines.append(f"Unchanged, so not recorded again: {', '.join(unchanged)}.")
    if not lines and not refused:
        return "Nothing typed in, so nothing recorded."
    if refused:
        lines.append("Not recorded (type them again with `/numbers`):")
        lines.extend(f"- {r}" for r in refused)
    lines.append("Typed-in figures do not count for the day's 'done when': measure with `/bench`.")
    return fit("\n".join(lines))


def _table(view: DayNumbers) -> str:
    """A narrow table that reads on a phone: field, typed, measured, limit."""
    head = ("", "typed", "measured", "limit")
    rows = []
    for row in view.rows:
        rows.append(
            (
                row.field.server,
                f"{row.entered.value:.1f}" if row.entered else "-",
                f"{row.measured.value:.1f}" if row.measured else "-",
                "?" if isinstance(row.limit, str) else about_text(row.limit.tokens_per_second),
            )
        )
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    lines = [
        " ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in (head, *rows)
    ]
    return "```\n" + "\n".join(lines) + "\n```"


def show_numbers(session: Session, who: Who, now: datetime, day: int | None = None) -> str:
    """`/numbers show`: the member's typed and measured figures (tokens/s) and 'done when'."""
    member = member_of(session, who, now)
    number = day if day is not None else numbers_day(session, member, now)
    if number is None:
        return "No day in the loaded course asks for numbers yet."
    view = day_numbers(session, member, number)
    parts = [f"**Day {view.day}: your numbers** (tokens per second)"]
    if view.rows:
        parts.append(_table(view))
    for row in view.rows:
        if row.entered is not None and (row.entered.typed_unit or "tok/s") != "tok/s":
            parts.append(f"- {row.field.server}: typed as {typed_text(row.entered)}")
        for flag in row.flags:
            parts.append(f"- {row.field.server}: {flag}")
        if row.entered is None and row.measured is None and row.field.hint:
            parts.append(f"- {row.field.server}: {row.field.hint}")
    done = view.done
    if done.text:
        parts.append(f"Done when: {done.text}")
    parts.append(("✅ Done: " if done.done else "Not yet: ") + done.message)
    return fit("\n".join(parts))
