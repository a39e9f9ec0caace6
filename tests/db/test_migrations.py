"""Alembic: from empty to head and back on SQLite and PostgreSQL, models and migrations agree,
and upgrading a database that already holds rows loses none of them."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text

from felab_core.db.models import Base
from felab_core.db.session import (
    alembic_config,
    current_revision,
    downgrade,
    ensure_schema,
    head_revision,
    upgrade,
)


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def test_upgrade_from_empty_then_downgrade_to_nothing(empty_engine: Engine) -> None:
    upgrade(empty_engine)
    assert current_revision(empty_engine) == head_revision()
    assert _tables(empty_engine) == set(Base.metadata.tables)
    downgrade(empty_engine, "base")
    assert _tables(empty_engine) == set()
    upgrade(empty_engine)  # and up again: downgrades leave nothing behind that blocks it
    assert _tables(empty_engine) == set(Base.metadata.tables)


def test_models_and_migrations_agree(empty_engine: Engine) -> None:
    upgrade(empty_engine)
    with empty_engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(ctx, Base.metadata)
    assert diff == [], f"models differ from the migrations; write a migration for: {diff}"


def test_every_revision_downgrades_one_step(empty_engine: Engine) -> None:
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    revisions = [r.revision for r in reversed(list(script.walk_revisions()))]
    for rev in revisions:
        upgrade(empty_engine, rev)
    for rev in reversed(revisions):
        downgrade(empty_engine, "-1")
        assert current_revision(empty_engine) != rev


SEED = [
    "INSERT INTO cohorts (id, name, guild_id, channel_id, post_time, timezone, start_date, "
    "advance, manual_day, join_mode, created_at) VALUES (1, 'Spring', 'g', 'c', '09:00:00', "
    "'Europe/London', '2026-03-02', 'daily', 1, 'open', '2026-03-01 10:00:00')",
    "INSERT INTO members (id, cohort_id, discord_id, display_name, role, timezone, chip, "
    "joined_at, streak_current, streak_best, reviews_total, recall_tries, recalled) VALUES "
    "(1, 1, '1001', 'Ada', 'student', 'Europe/London', 'M4 Pro', '2026-03-01 10:00:00', 2, 3, "
    "5, 3, 2), (2, 1, '9001', 'Prof', 'instructor', 'UTC', NULL, '2026-03-01 10:00:00', 0, 0, "
    "0, 0, 0)",
    "INSERT INTO member_servers (id, member_id, server, model, model_bytes) VALUES "
    "(1, 1, 'mlx', 'llama-3.1-8b-4bit', 4900000000)",
    "INSERT INTO content_packs (id, key, title, source_path, checksum, loaded_at, retired) VALUES "
    "(1, 'course.day-02', 'Day 2', 'day-02.yaml', 'x', '2026-03-01 10:00:00', false)",
    "INSERT INTO content_days (id, pack_id, number, title, summary, done_when, retired) VALUES "
    "(1, 1, 2, 'Day 2', '', '{}', false)",
    "INSERT INTO cards (id, key, day_id, position, question, answer, body, retired) VALUES "
    "(1, 'd02.card.a', 1, 0, 'Q', 'A', '{}', false)",
    "INSERT INTO card_states (id, member_id, card_id, state, step, stability, difficulty, due, "
    "last_review, reps, lapses) VALUES (1, 1, 1, 2, NULL, 3.2, 5.1, '2026-03-05 10:00:00', "
    "'2026-03-02 10:00:00', 2, 0)",
    "INSERT INTO reviews (id, member_id, card_id, rating, reviewed_at, local_day, state_before, "
    "due_after, source) VALUES (1, 1, 1, 3, '2026-03-02 10:00:00', '2026-03-02', 0, "
    "'2026-03-02 10:10:00', 'cli'), (2, 1, 1, 3, '2026-03-02 10:11:00', '2026-03-02', 1, "
    "'2026-03-05 10:00:00', 'cli')",
    "INSERT INTO posts (id, cohort_id, day_number, kind, local_date, claimed_at) VALUES "
    "(1, 1, 2, 'daily', '2026-03-03', '2026-03-03 09:00:00')",
    "INSERT INTO whiteboards (id, key, day_id, position, question, answer, body, retired) VALUES "
    "(7, 'd02.board.a', 1, 0, 'Q', 'A', '{\"given\": \"g\"}', false)",
]
#: Tables a later revision renamed: their rows are counted under the new name.
RENAMED = {"whiteboards": "drill_items"}


def _counts(engine: Engine, tables: list[str]) -> dict[str, int]:
    there = _tables(engine)
    with engine.connect() as conn:
        return {
            t: conn.execute(
                text(f"SELECT count(*) FROM {t if t in there else RENAMED[t]}")
            ).scalar_one()
            for t in tables
        }


def test_upgrade_keeps_every_row(empty_engine: Engine) -> None:
    """Seed at the first revision, upgrade to head, then down and up again: no row lost."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    first = next(r.revision for r in script.walk_revisions() if r.down_revision is None)
    upgrade(empty_engine, first)
    with empty_engine.begin() as conn:
        for stmt in SEED:
            conn.execute(text(stmt))
    seeded = list(_tables(empty_engine))
    before = _counts(empty_engine, seeded)
    assert before["members"] == 2 and before["reviews"] == 2

    upgrade(empty_engine)
    assert _counts(empty_engine, seeded) == before
    with empty_engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT discord_id, display_name, chip, streak_best, public_numbers FROM members "
                "ORDER BY id"
            )
        ).all()
        assert [tuple(r) for r in rows] == [
            ("1001", "Ada", "M4 Pro", 3, True),
            ("9001", "Prof", None, 0, True),
        ]
        stability = conn.execute(text("SELECT stability FROM card_states")).scalar_one()
        assert stability == pytest.approx(3.2)
        board = conn.execute(text("SELECT id, kind, key FROM drill_items")).one()
        assert tuple(board) == (7, "whiteboard", "d02.board.a")  # the id the buttons name
    with empty_engine.begin() as conn:  # new items number on from the copied ids
        conn.execute(
            text(
                "INSERT INTO drill_items (kind, key, day_id, position, question, answer, body, "
                "retired) VALUES ('whiteboard', 'd02.board.b', 1, 1, 'Q', 'A', '{}', false)"
            )
        )
        assert conn.execute(text("SELECT max(id) FROM drill_items")).scalar_one() > 7
        conn.execute(text("DELETE FROM drill_items WHERE key = 'd02.board.b'"))

    downgrade(empty_engine, first)
    assert _counts(empty_engine, seeded) == before
    upgrade(empty_engine)
    assert _counts(empty_engine, seeded) == before


def test_ensure_schema_upgrades_sqlite_but_not_a_shared_database(empty_engine: Engine) -> None:
    if empty_engine.dialect.name == "sqlite":
        ensure_schema(empty_engine)
        assert current_revision(empty_engine) == head_revision()
    else:
        from felab_core.db.session import DatabaseError

        with pytest.raises(DatabaseError, match="felab db upgrade"):
            ensure_schema(empty_engine)
        upgrade(empty_engine)
        ensure_schema(empty_engine)  # at head: nothing to say
