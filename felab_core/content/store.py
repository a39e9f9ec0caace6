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

from pydantic import BaseModel, ValidationError
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


def _model_of(section: str) -> type[Any]:
    fixed: dict[str, type[Any]] = {
        "steps": m.ContentStep,
        "numbers": m.NumberField,
        "cards": m.Card,
        "prompts": m.SpeakPrompt,
    }
    return fixed.get(section, m.DrillItem)


def _taken_ids(session: Session, parsed: list[ParsedPack]) -> list[ContentProblem]:
    """An item id that the database holds for another pack's day, that pack not in this load:
    loading it would move the row, and the students' review history, to another question
    (sweep 24, M1: a day-03 pack took over a loaded day-02 card, "card updated: 1"). A pack
    in the same load that no longer lists the id gives it up: the item moves, as meant."""
    loading = {p.pack.id for p in parsed}
    wanted: dict[type[Any], dict[str, tuple[ParsedPack, str]]] = {}
    for p in parsed:
        for section, i, item_id, _ in p.pack.all_items():
            wanted.setdefault(_model_of(section), {})[item_id] = (p, f"{section}[{i}].id")
    problems: list[ContentProblem] = []
    for model, ids in wanted.items():
        rows = session.execute(
            select(model.key, m.ContentDay.number, m.ContentPack.key, m.ContentPack.source_path)
            .join(m.ContentDay, m.ContentDay.id == model.day_id)
            .join(m.ContentPack, m.ContentPack.id == m.ContentDay.pack_id)
            .where(model.key.in_(sorted(ids)))
        ).all()
        for key, number, owner, source in sorted(rows):
            p, where = ids[key]
            if owner in loading:
                continue
            problems.append(
                ContentProblem(
                    p.path,
                    where,
                    f"{key!r} is already an item of day {number} in the database (pack "
                    f"{owner!r}, {source}), and this pack is day {p.pack.day}: loading it "
                    f"would take it from day {number}, with its students' history; give it a "
                    f"new id, or load {source} in the same folder without it to move it here",
                )
            )
    return problems


def _db_problems(session: Session, parsed: list[ParsedPack]) -> list[ContentProblem]:
    """Rules that need the database: a day number already held by another pack, and an item
    id held by another pack's day."""
    problems: list[ContentProblem] = _taken_ids(session, parsed)
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


def check_with_database(folder: Path) -> tuple[CheckReport, str | None]:
    """`felab content check`: the folder's packs, then, where felab's database is there at the
    latest schema, the rules that need it (a day or an id another loaded pack holds). Changes
    nothing, makes no database. The second value says why the database was not compared."""
    from sqlalchemy.exc import SQLAlchemyError

    from felab_core.db.session import (
        DatabaseError,
        current_revision,
        head_revision,
        make_engine,
        session_factory,
        sqlite_file,
    )
    from felab_core.settings import get_settings

    report = check_dir(folder)
    if not report.ok:
        return report, None
    only = "ids and days were checked within this folder only"
    try:
        url = get_settings().resolved_database_url()
        engine = make_engine(url, create=False)
    except (DatabaseError, ValidationError) as exc:
        return report, f"the database could not be used ({str(exc).splitlines()[0]}): {only}"
    try:
        path = sqlite_file(url) if engine.dialect.name == "sqlite" else None
        if engine.dialect.name == "sqlite" and (path is None or not path.is_file()):
            return report, f"no database yet: {only}"
        if current_revision(engine) != head_revision():
            return report, f"the database is not at the latest schema: {only}"
        with session_factory(engine)() as session:
            report.problems.extend(_db_problems(session, report.packs))
            session.rollback()
    except (DatabaseError, SQLAlchemyError) as exc:
        said = str(getattr(exc, "orig", None) or exc).splitlines()[0][:200]
        return report, f"the database could not be read ({said}): {only}"
    finally:
        engine.dispose()
    return report, None


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
