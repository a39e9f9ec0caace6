"""Loading checked packs into the database: all or nothing, idempotent, history kept.

Rows are matched by the ids written in the files, so a second load of the same folder changes
nothing, an edited card is updated in place (its review history stays with it), and an item
removed from its file is retired (hidden from drills, its history kept), never deleted. Packs
that are in the database but not in the folder are left as they are: loading one file never
retires the rest of the course.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.content.format import METRICS
from felab_core.content.loader import (
    CheckReport,
    ContentError,
    ContentProblem,
    ParsedPack,
    check_dir,
)
from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.drills.kinds import KINDS


@dataclass
class LoadReport:
    """What a load did, counted per kind of item ('card added', 'card updated' ...)."""

    counts: Counter[str] = field(default_factory=Counter)
    packs: list[str] = field(default_factory=list)
    skipped: list[ContentProblem] = field(default_factory=list)  # CheckReport.skipped

    def add(self, kind: str, outcome: str) -> None:
        self.counts[f"{kind} {outcome}"] += 1

    @property
    def changed(self) -> bool:
        return any(n for k, n in self.counts.items() if not k.endswith("unchanged") and n)

    def lines(self) -> list[str]:
        return [f"{k}: {n}" for k, n in sorted(self.counts.items())]


def _sync(row: Any, values: dict[str, Any]) -> bool:
    """Set the values that differ; True when anything changed."""
    changed = False
    for name, value in values.items():
        if getattr(row, name) != value:
            setattr(row, name, value)
            changed = True
    return changed


def _body(spec: BaseModel, *skip: str) -> dict[str, Any]:
    return spec.model_dump(mode="json", exclude={"id", "step", *skip}, exclude_none=True)


def _db_problems(session: Session, parsed: list[ParsedPack]) -> list[ContentProblem]:
    """Rules that need the database: a day number already held by another pack."""
    problems: list[ContentProblem] = []
    rows = session.execute(
        select(m.ContentDay.number, m.ContentPack.key).join(
            m.ContentPack, m.ContentPack.id == m.ContentDay.pack_id
        )
    ).all()
    holder = {number: key for number, key in rows}
    for p in parsed:
        owner = holder.get(p.pack.day)
        if owner is not None and owner != p.pack.id:
            problems.append(
                ContentProblem(
                    p.path,
                    "day",
                    f"day {p.pack.day} is already loaded from pack {owner!r}; give this pack "
                    f"that id to replace it, or another day",
                )
            )
    return problems


def load_packs(session: Session, parsed: list[ParsedPack], report: LoadReport) -> None:
    """Write checked packs; the caller's transaction makes it all or nothing."""
    now = utcnow()
    for p in parsed:
        pack = p.pack
        report.packs.append(pack.id)
        pack_row = session.scalar(select(m.ContentPack).where(m.ContentPack.key == pack.id))
        pack_values = {
            "title": pack.title,
            "source_path": p.path.name,
            "checksum": p.checksum,
            "retired": False,
        }
        if pack_row is None:
            pack_row = m.ContentPack(key=pack.id, loaded_at=now, **pack_values)
            session.add(pack_row)
            session.flush()
            report.add("pack", "added")
        elif _sync(pack_row, pack_values):
            pack_row.loaded_at = now
            report.add("pack", "updated")
        else:
            report.add("pack", "unchanged")

        day_row = session.scalar(select(m.ContentDay).where(m.ContentDay.pack_id == pack_row.id))
        day_values = {
            "number": pack.day,
            "title": pack.title,
            "summary": pack.summary or "",
            "minutes": pack.minutes,
            "done_when": pack.done_when.model_dump(mode="json") if pack.done_when else {},
            "retired": False,
        }
        if day_row is None:
            day_row = m.ContentDay(pack_id=pack_row.id, **day_values)
            session.add(day_row)
            session.flush()
            report.add("day", "added")
        else:
            report.add("day", "updated" if _sync(day_row, day_values) else "unchanged")
        day_id = day_row.id

        steps: dict[str, int] = {}
        for pos, step in enumerate(pack.steps):
            row = _upsert(
                session,
                m.ContentStep,
                step.id,
                {"day_id": day_id, "position": pos, "title": step.title, "retired": False},
                "step",
                report,
            )
            steps[step.id] = row.id

        for pos, card in enumerate(pack.cards):
            _upsert(
                session,
                m.Card,
                card.id,
                {
                    "day_id": day_id,
                    "step_id": _step(steps, card.step),
                    "position": pos,
                    "question": card.question,
                    "answer": card.answer,
                    "body": _body(card, "question", "answer"),
                    "retired": False,
                },
                "card",
                report,
            )
        for pos, prompt in enumerate(pack.prompts):
            _upsert(
                session,
                m.SpeakPrompt,
                prompt.id,
                {
                    "day_id": day_id,
                    "step_id": _step(steps, prompt.step),
                    "position": pos,
                    "question": prompt.question,
                    "answer": prompt.answer,
                    "seconds": prompt.seconds,
                    "body": _body(prompt, "question", "answer", "seconds"),
                    "retired": False,
                },
                "prompt",
                report,
            )
        for kind in KINDS.values():
            for pos, item in enumerate(pack.items_of(kind.section)):
                _upsert(
                    session,
                    m.DrillItem,
                    item.id,
                    {
                        "kind": kind.name,
                        "day_id": day_id,
                        "step_id": _step(steps, item.step),
                        "position": pos,
                        "question": item.question,
                        "answer": item.answer,
                        "body": _body(item, "question", "answer"),
                        "retired": False,
                    },
                    kind.name,
                    report,
                )
        for pos, num in enumerate(pack.numbers):
            _upsert(
                session,
                m.NumberField,
                num.id,
                {
                    "day_id": day_id,
                    "step_id": _step(steps, num.step),
                    "position": pos,
                    "server": num.server,
                    "metric": num.metric,
                    "unit": METRICS[num.metric],
                    "label": num.label,
                    "body": _body(num, "server", "metric", "label"),
                    "retired": False,
                },
                "number field",
                report,
            )
        keep: dict[type[Any], set[str]] = {
            m.ContentStep: {s.id for s in pack.steps},
            m.Card: {c.id for c in pack.cards},
            m.SpeakPrompt: {s.id for s in pack.prompts},
            m.NumberField: {n.id for n in pack.numbers},
        }
        for model, keys in keep.items():
            _retire_missing(session, model, day_id, keys, report)
        for kind in KINDS.values():
            items = {i.id for i in pack.items_of(kind.section)}
            _retire_missing(session, m.DrillItem, day_id, items, report, kind.name)
    session.flush()


def _step(steps: dict[str, int], key: str | None) -> int | None:
    return steps[key] if key is not None else None


def _upsert(
    session: Session,
    model: type[Any],
    key: str,
    values: dict[str, Any],
    kind: str,
    report: LoadReport,
) -> Any:
    row = session.scalar(select(model).where(model.key == key))
    if row is None:
        row = model(key=key, **values)
        session.add(row)
        session.flush()
        report.add(kind, "added")
        return row
    report.add(kind, "updated" if _sync(row, values) else "unchanged")
    return row


def _retire_missing(
    session: Session,
    model: type[Any],
    day_id: int,
    keys: set[str],
    report: LoadReport,
    drill_kind: str | None = None,
) -> None:
    kind = (
        drill_kind
        or {
            m.ContentStep: "step",
            m.Card: "card",
            m.SpeakPrompt: "prompt",
            m.NumberField: "number field",
        }[model]
    )
    query = select(model).where(model.day_id == day_id, model.retired.is_(False))
    if drill_kind is not None:
        query = query.where(model.kind == drill_kind)
    rows = session.scalars(query).all()
    for row in rows:
        if row.key not in keys:
            row.retired = True
            report.add(kind, "retired")


def check_folder(session: Session | None, folder: Path) -> CheckReport:
    """Check a folder's packs, and, given a session, the rules that need the database too."""
    report = check_dir(folder)
    if session is not None and report.ok:
        report.problems.extend(_db_problems(session, report.packs))
    return report


def load_folder(session: Session, folder: Path) -> LoadReport:
    """Check, then load every pack in `folder` in one transaction; raise ContentError if unsound.

    The caller commits (session_scope); on any error nothing of this load is kept.
    """
    report = check_folder(session, folder)
    if not report.ok:
        raise ContentError(report.problems, report.skipped)
    loaded = LoadReport(skipped=report.skipped)
    with session.begin_nested():
        load_packs(session, report.packs, loaded)
    return loaded
