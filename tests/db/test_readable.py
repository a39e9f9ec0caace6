"""Every value felab writes reads back through felab_core.db.readable on both databases (no
false alarm on a real cohort's rows), and what a hand edit leaves is named by table, column and
row (seventeenth sweep, group b, H3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db import readable
from felab_core.db.readable import unreadable_values
from felab_core.db.session import make_engine, upgrade
from felab_core.numbers.recording import create_job, record_entered
from felab_core.people.members import set_hardware
from tests.db_support import NOW


def test_what_felab_writes_reads_back(
    db: Session, day2: None, student: m.Member, instructor: m.Member
) -> None:
    set_hardware(db, student, bandwidth_gb_s=273)
    record_entered(db, student, "ollama", "44.6")
    job = create_job(db, student, "ollama", "quick")
    job.record, job.chart_png, job.params = {"runs": [{"concurrency": 1}]}, b"\x89PNG", {"n": 5}
    db.flush()
    assert unreadable_values(db.connection()) == []


def test_a_hand_edit_is_named(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    upgrade(engine)
    pack = "INSERT INTO content_packs VALUES (1, 'p', 't', 's', 'c', '2026-03-02 09:00:00', 0)"
    days = (
        "INSERT INTO content_days (id, pack_id, number, title, summary, done_when, retired) "
        "VALUES (1, 1, 1, 't', '', '{bad', 0), (2, 1, 2, x'00', '', 'null', 0), "
        "(3, 1, 3, 't', '', '[1]', 0)"
    )
    with engine.begin() as conn:
        conn.execute(text(pack))
        conn.execute(text(days))
    with engine.connect() as conn:
        found = [str(u) for u in unreadable_values(conn)]
    engine.dispose()
    assert found == [
        "content_days.done_when of row 1 ('{bad', not JSON)",
        "content_days.title of row 2 (b'\\x00', not text)",
        "content_days.done_when of row 2 ('null', not JSON)",  # NOT NULL: JSON's null is none
    ]


def _reviews(db: Session, member: m.Member, count: int) -> None:
    """`count` ordinary reviews of one card, as felab writes them."""
    card = db.scalars(select(m.Card.id).limit(1)).one()
    db.add_all(
        m.Review(
            member_id=member.id,
            card_id=card,
            rating=3,
            reviewed_at=NOW,
            local_day=NOW.date(),
            state_before=0,
            due_after=NOW,
            duration_ms=900,
        )
        for _ in range(count)
    )
    db.flush()


def test_ordinary_rows_are_passed_by_sql_not_read_one_by_one(
    db: Session, day2: None, student: m.Member, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twentieth sweep (b) B18: a backup of three million reviews was read value by value in
    Python before a restore, 33 s in silence; SQL now passes the rows it can show fine."""
    if db.connection().dialect.name != "sqlite":
        pytest.skip("SQLite's own check")
    _reviews(db, student, 200)
    read: list[str] = []
    real = readable._problem

    def counted(raw: Any, read_with: Any, col: Any, where: tuple[str, str]) -> str | None:
        read.append(where[0])
        return real(raw, read_with, col, where)

    monkeypatch.setattr(readable, "_problem", counted)
    assert unreadable_values(db.connection()) == []
    assert "reviews" not in read


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("reviewed_at", "'2026-02-30 10:00:00.000000'"),
        ("reviewed_at", "'2026-01-01 24:00:00.000000'"),
        ("reviewed_at", "'0000-01-01 10:00:00.000000'"),
        ("reviewed_at", "'2026-01-01 10:00:00.00000x'"),
        ("reviewed_at", "x'00'"),
        ("reviewed_at", "12"),
        ("local_day", "'2026-02-30'"),
        ("local_day", "'0000-01-01'"),
        ("local_day", "'2026-1-01'"),
        ("rating", "2.5"),
        ("rating", "'three'"),
        ("duration_ms", "9e999"),
        ("source", "x'00'"),
        ("state_before", "x'01'"),
    ],
)
def test_what_sql_passes_python_would_pass(
    db: Session,
    day2: None,
    student: m.Member,
    monkeypatch: pytest.MonkeyPatch,
    column: str,
    value: str,
) -> None:
    """SQL passes only values the value-by-value check passes: each odd value is still named."""
    if db.connection().dialect.name != "sqlite":
        pytest.skip("SQLite's own check")
    _reviews(db, student, 3)
    db.execute(text("PRAGMA ignore_check_constraints = 1"))
    db.execute(
        text(f"UPDATE reviews SET {column} = {value} WHERE id = (SELECT max(id) FROM reviews)")
    )
    found = unreadable_values(db.connection())
    monkeypatch.setattr(readable, "_suspect_rows", lambda *_: "1 = 1")
    assert found == unreadable_values(db.connection())
    assert [u.column for u in found] == [column]
