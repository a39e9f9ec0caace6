"""A live SQLite database SQLite cannot read, and one that is not felab's (sweep 24, M3, M5,
M6): `db backup` refuses it in the words every command uses (exit 2), and `db restore`, the
tool for a broken database, replaces it, keeping the unreadable file aside and saying where."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory
from felab_core.ops.backup import BackupError, backup, restore
from felab_core.settings import get_settings
from tests.ops.test_restore_checks import _live_file, good, live  # noqa: F401 (fixtures)

runner = CliRunner()


def _said(output: str) -> str:
    return " ".join(output.split())


def _cut_short(path: Path) -> bytes:
    """The file cut to half its size, as a full disk or a copy stopped midway leaves it."""
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    return path.read_bytes()


def _members(url: str) -> int:
    engine = make_engine(url, create=False)
    try:
        with session_factory(engine)() as session:
            return int(session.scalar(select(func.count()).select_from(m.Member)) or 0)
    finally:
        engine.dispose()


@pytest.mark.parametrize("damage", ["cut short", "not sqlite"])
def test_a_backup_of_an_unreadable_database_is_refused(
    live: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    damage: str,
) -> None:
    database = _live_file(live)
    if damage == "cut short":
        _cut_short(database)
        says = "is damaged (SQLite: database disk image is malformed): restore a backup"
    else:
        database.write_bytes(b"not a database at all " * 300)
        says = "is not an SQLite database (another program's file, or felab's overwritten"
    with pytest.raises(BackupError, match=r"nothing was backed up"):
        backup(live, tmp_path / "x.bak")
    out = runner.invoke(app, ["db", "backup", str(tmp_path / "x.bak")])
    assert out.exit_code == 2, out.output
    assert says in _said(out.output), out.output
    assert "felab db restore FILE --yes" in _said(out.output)
    assert not list(tmp_path.glob("*x.bak*"))  # no backup, no partial file left


def test_a_page_damaged_inside_the_live_database_is_not_backed_up(
    live: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    database = _live_file(live)
    con = sqlite3.connect(database)
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'members'").fetchone()[0]
    con.close()
    raw = bytearray(database.read_bytes())
    at = (root - 1) * page_size
    raw[at : at + page_size] = b"\xff" * page_size  # the members table's page, overwritten
    database.write_bytes(bytes(raw))
    out = runner.invoke(app, ["db", "backup", str(tmp_path / "x.bak")])
    assert out.exit_code == 2, out.output
    assert "is damaged (SQLite: database disk image is malformed" in _said(out.output)
    assert not list(tmp_path.glob("*x.bak*"))


@pytest.mark.parametrize("damage", ["cut short", "not sqlite"])
def test_a_restore_replaces_an_unreadable_database_and_keeps_it_aside(
    live: str,  # noqa: F811 (the fixture)
    good: Path,  # noqa: F811 (the fixture)
    damage: str,
) -> None:
    database = _live_file(live)
    if damage == "cut short":
        broken = _cut_short(database)
    else:
        broken = b"not a database at all " * 300
        database.write_bytes(broken)
    journal = Path(f"{database}-journal")
    journal.write_bytes(b"a journal left beside the broken file")
    out = runner.invoke(app, ["db", "restore", str(good), "--yes"])
    assert out.exit_code == 0, out.output
    kept = database.with_name(f"{database.name}.unreadable")
    said = _said(out.output)
    assert "restored from" in said
    assert "could not be read (SQLite: " in said and f"kept as {kept}" in said, said
    assert kept.read_bytes() == broken
    assert not journal.exists()  # nothing of the broken file's is played into the new one
    assert _members(live) == 1
    # once more: the first kept file is not replaced
    database.write_bytes(broken)
    note = restore(live, good)
    assert note is not None and f"kept as {kept}-2" in note
    assert kept.read_bytes() == broken and _members(live) == 1


def test_a_restore_over_a_readable_database_says_nothing_more(
    live: str,  # noqa: F811 (the fixture)
    good: Path,  # noqa: F811 (the fixture)
) -> None:
    assert restore(live, good) is None
    assert not list(_live_file(live).parent.glob("*.unreadable*"))


def test_another_programs_sqlite_file_is_not_backed_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users VALUES (1, 'bob')")
    con.commit()
    con.close()
    before = other.read_bytes()
    monkeypatch.setenv("FELAB_DATABASE_URL", f"sqlite:///{other}")
    get_settings.cache_clear()
    try:
        out = runner.invoke(app, ["db", "backup", str(tmp_path / "o.bak")])
        status = runner.invoke(app, ["db", "status"])
    finally:
        get_settings.cache_clear()
    assert out.exit_code == 2, out.output
    said = _said(out.output)
    assert "holds another program's tables (users) and no felab schema" in said, said
    assert "nothing was backed up" in said
    assert status.exit_code == 2 and "holds another program's tables (users)" in status.output
    assert not list(tmp_path.glob("*o.bak*"))
    assert other.read_bytes() == before


def test_an_empty_sqlite_file_is_not_backed_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(BackupError, match=r"is empty \(no felab schema yet\): nothing to back up"):
        backup(f"sqlite:///{empty}", tmp_path / "e.bak")
    assert not list(tmp_path.glob("*e.bak*"))


def test_other_commands_say_the_live_database_is_damaged(
    live: str,  # noqa: F811 (the fixture)
) -> None:
    _cut_short(_live_file(live))
    out = runner.invoke(app, ["db", "status"])
    assert out.exit_code == 2, out.output
    said = _said(out.output)
    assert "is damaged (SQLite: database disk image is malformed): restore a backup" in said
    assert "a file felab can write" not in said
