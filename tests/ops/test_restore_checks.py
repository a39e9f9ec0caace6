"""`felab db restore` checks an SQLite backup before it replaces anything: damaged pages, a
schema this felab does not know, a table or column missing. The live database is untouched."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from datetime import date, time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.ops.backup import BackupError, backup, check_sqlite_backup, restore
from felab_core.people.members import add_member, create_cohort
from felab_core.settings import get_settings

runner = CliRunner()


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A felab database with a member in it, named by FELAB_DATABASE_URL."""
    url = f"sqlite:///{tmp_path / 'live.db'}"
    engine = make_engine(url)
    upgrade(engine)
    with session_scope(session_factory(engine)) as s:
        c = create_cohort(s, "C", timezone="UTC", start_date=date(2026, 3, 2), post_time=time(9))
        add_member(s, c, "1", display_name="Ada")
    engine.dispose()
    monkeypatch.setenv("FELAB_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


@pytest.fixture
def good(live: str, tmp_path: Path) -> Path:
    return backup(live, tmp_path / "good.db")


def _copy(good: Path, name: str) -> Path:
    out = good.with_name(name)
    shutil.copy(good, out)
    return out


def _live_file(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


def _refused(url: str, source: Path, says: str) -> None:
    live = _live_file(url)
    before = live.read_bytes()
    with pytest.raises(BackupError, match=says):
        restore(url, source)
    assert live.read_bytes() == before
    out = runner.invoke(app, ["db", "restore", str(source), "--yes"])
    assert out.exit_code == 2, out.output
    assert live.read_bytes() == before


def test_a_good_backup_restores(live: str, good: Path) -> None:
    assert check_sqlite_backup(good)
    out = runner.invoke(app, ["db", "restore", str(good), "--yes"])
    assert out.exit_code == 0, out.output


def test_damaged_pages_are_refused(live: str, good: Path) -> None:
    corrupt = _copy(good, "corrupt.db")
    con = sqlite3.connect(corrupt)
    page = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'members'").fetchone()[0]
    con.close()
    assert root > 1
    with open(corrupt, "r+b") as fh:  # the members page in the middle: its count of cells
        fh.seek((root - 1) * page + 3)
        fh.write(b"\xff\xff")
    con = sqlite3.connect(corrupt)  # it still looks like felab's: only a check finds it
    assert con.execute("SELECT version_num FROM alembic_version").fetchall()
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        con.execute("PRAGMA integrity_check").fetchall()
    con.close()
    _refused(live, corrupt, "is damaged")


def test_a_missing_table_is_refused(live: str, good: Path) -> None:
    dropped = _copy(good, "droptable.db")
    con = sqlite3.connect(dropped)
    con.execute("PRAGMA foreign_keys=OFF")
    con.execute("DROP TABLE numbers")
    con.commit()
    con.close()
    _refused(live, dropped, "table numbers")


def test_a_missing_column_is_refused(live: str, good: Path) -> None:
    changed = _copy(good, "dropcolumn.db")
    con = sqlite3.connect(changed)
    con.execute("ALTER TABLE posts RENAME TO posts_old")
    con.execute("CREATE TABLE posts (id INTEGER PRIMARY KEY)")
    con.commit()
    con.close()
    _refused(live, changed, r"posts\.")


def test_a_trigger_or_view_felab_never_makes_is_refused(live: str, good: Path) -> None:
    """Fourteenth sweep M8: a backup with an added trigger restored, and the next write
    emptied the members table."""
    evil = _copy(good, "evil.db")
    con = sqlite3.connect(evil)
    con.execute("CREATE TRIGGER evil AFTER INSERT ON numbers BEGIN DELETE FROM members; END")
    con.commit()
    con.close()
    _refused(live, evil, "holds what felab's schema never makes \\(trigger evil\\)")


def test_a_newer_schema_is_refused(live: str, good: Path) -> None:
    future = _copy(good, "future.db")
    con = sqlite3.connect(future)
    con.execute("UPDATE alembic_version SET version_num = '9999'")
    con.commit()
    con.close()
    _refused(live, future, "made by a newer felab")


def test_no_schema_version_is_no_felab_backup(live: str, good: Path) -> None:
    bare = _copy(good, "bare.db")
    con = sqlite3.connect(bare)
    con.execute("DROP TABLE alembic_version")
    con.commit()
    con.close()
    _refused(live, bare, "not a felab SQLite backup")


def test_an_older_known_schema_restores(live: str, tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    engine = make_engine(f"sqlite:///{old}")
    upgrade(engine, "0005")
    engine.dispose()
    assert check_sqlite_backup(old) == "0005"
    restore(live, old)  # the next command upgrades it
    con = sqlite3.connect(old)
    con.execute("PRAGMA foreign_keys=OFF")
    con.execute("DROP TABLE workers")  # made by 0003
    con.commit()
    con.close()
    with pytest.raises(BackupError, match="table workers"):
        check_sqlite_backup(old)


def test_a_read_only_database_is_not_restored(live: str, good: Path) -> None:
    with pytest.raises(BackupError, match=r"read-only \(mode=ro"):
        restore(f"{live}?mode=ro&uri=true", good)


def test_nothing_is_backed_up_from_a_database_that_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(BackupError, match="does not exist"):
        backup(f"sqlite:///{tmp_path / 'none.db'}", tmp_path / "b.bak")
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "b.bak").exists()
