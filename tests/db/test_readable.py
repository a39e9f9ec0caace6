"""Every value felab writes reads back through felab_core.db.readable on both databases (no
false alarm on a real cohort's rows), and what a hand edit leaves is named by table, column and
row (seventeenth sweep, group b, H3)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.readable import unreadable_values
from felab_core.db.session import make_engine, upgrade
from felab_core.numbers.recording import create_job, record_entered
from felab_core.people.members import set_hardware


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
