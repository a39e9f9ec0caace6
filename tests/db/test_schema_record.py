"""A database whose alembic_version table is not one revision name (two rows, a NULL, a
number: a file changed by hand, or another program's) is said to be damaged, with what to do,
exit 2; it had stopped `db status`, `db upgrade` and every database command on Alembic's
CommandError (exit 70), and `db upgrade` had written felab's tables in beside a NULL
(seventeenth sweep, group b, H1)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.db.session import DatabaseError, current_revision, make_engine, upgrade
from felab_core.settings import get_settings

runner = CliRunner()

DAMAGED = {
    "two rows": ("varchar(32)", ["0014", "0013"], "2 rows"),
    "a NULL": ("varchar(32)", [None], "an empty (NULL) row"),
    "a number": ("", [14], "the number 14"),  # no type: SQLite keeps the integer
    "a blank name": ("varchar(32)", [" "], "a blank or unprintable name"),
}


def _damaged(path: Path, column_type: str, rows: list[object]) -> Path:
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE alembic_version (version_num {column_type})")
    con.executemany("INSERT INTO alembic_version VALUES (?)", [(r,) for r in rows])
    con.commit()
    con.close()
    return path


@pytest.fixture
def fresh_settings() -> Iterator[None]:
    """Settings read again after the test (it sets FELAB_DATABASE_URL)."""
    yield
    get_settings.cache_clear()


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_schema_record_is_said(tmp_path: Path, case: str) -> None:
    column_type, rows, said = DAMAGED[case]
    engine = make_engine(f"sqlite:///{_damaged(tmp_path / 'x.db', column_type, rows)}")
    with pytest.raises(
        DatabaseError, match=re.escape(f"alembic_version holds {said}, not one revision")
    ):
        current_revision(engine)
    engine.dispose()


@pytest.mark.parametrize("case", sorted(DAMAGED))
@pytest.mark.parametrize("args", [["db", "status"], ["db", "upgrade"], ["numbers", "show"]])
def test_cli_says_it_with_exit_2_and_writes_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fresh_settings: None,
    case: str,
    args: list[str],
) -> None:
    column_type, rows, said = DAMAGED[case]
    db = _damaged(tmp_path / "x.db", column_type, rows)
    before = db.read_bytes()
    monkeypatch.setenv("FELAB_DATABASE_URL", f"sqlite:///{db}")
    get_settings.cache_clear()
    done = runner.invoke(app, args)
    assert done.exit_code == 2, done.output
    flat = " ".join(done.stderr.split())
    assert f"has a damaged schema record (alembic_version holds {said}" in flat
    assert "felab db restore FILE --yes" in flat and "unexpected" not in flat
    assert db.read_bytes() == before  # no tables written in beside it


def test_an_empty_record_is_still_a_database_at_base(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{_damaged(tmp_path / 'x.db', 'varchar(32)', [])}")
    assert current_revision(engine) is None
    upgrade(engine)
    assert current_revision(engine) is not None
    engine.dispose()
