"""A backup restored into the other engine is named for what it is, and nothing is replaced
(ninth sweep, M9: pg_dump's archive into SQLite was "not a felab SQLite backup", an SQLite
file into PostgreSQL was pg_restore's "does not appear to be a valid archive")."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.ops.backup import BackupError, backup, restore
from felab_core.people.members import add_member, create_cohort
from felab_core.settings import get_settings
from tests.db_support import new_pg_database_url
from tests.ops.test_backup import _names

runner = CliRunner()


def _with_a_member(url: str, name: str) -> None:
    engine = make_engine(url)
    upgrade(engine)
    with session_scope(session_factory(engine)) as s:
        c = create_cohort(s, "C", timezone="UTC", start_date=date(2026, 3, 2), post_time=time(9))
        add_member(s, c, "1", display_name=name)
    engine.dispose()


@pytest.fixture
def postgres() -> Iterator[str]:
    """A fresh PostgreSQL database of its own (dropped after), at felab's schema."""
    url, drop = new_pg_database_url()
    try:
        _with_a_member(url, "Grace")
        yield url
    finally:
        drop()


@pytest.fixture
def sqlite(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'felab.db'}"
    _with_a_member(url, "Ada")
    return url


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield
    get_settings.cache_clear()


def _cli_restore(monkeypatch: pytest.MonkeyPatch, url: str, source: Path) -> tuple[int, str]:
    monkeypatch.setenv("FELAB_DATABASE_URL", url)
    get_settings.cache_clear()
    out = runner.invoke(app, ["db", "restore", str(source), "--yes"])
    return out.exit_code, " ".join(out.output.split())


def test_a_postgresql_backup_into_sqlite(
    sqlite: str, postgres: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: None
) -> None:
    dump = backup(postgres, tmp_path / "pg.backup")
    live = Path(sqlite.removeprefix("sqlite:///"))
    before = live.read_bytes()
    says = (
        f"{dump} is a PostgreSQL backup (pg_dump); this database is SQLite: restore it into a "
        "PostgreSQL database (FELAB_DATABASE_URL)"
    )
    with pytest.raises(BackupError) as raised:
        restore(sqlite, dump)
    assert says in str(raised.value)
    code, said = _cli_restore(monkeypatch, sqlite, dump)
    assert code == 2 and says in said, said
    assert live.read_bytes() == before


def test_an_sqlite_backup_into_postgresql(
    sqlite: str, postgres: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: None
) -> None:
    copy = backup(sqlite, tmp_path / "sqlite.backup")
    says = f"{copy} is an SQLite backup; this database is PostgreSQL: restore it into an SQLite"
    with pytest.raises(BackupError) as raised:
        restore(postgres, copy)
    assert says in str(raised.value) and "pg_restore" not in str(raised.value)
    code, said = _cli_restore(monkeypatch, postgres, copy)
    assert code == 2 and says in said, said
    junk = tmp_path / "junk.backup"
    junk.write_bytes(b"not a backup at all")
    with pytest.raises(BackupError, match="is not a felab PostgreSQL backup"):
        restore(postgres, junk)
    assert _names(postgres) == ["Grace"]
    # the engine's own backups still restore
    assert backup(postgres, tmp_path / "pg.backup") and backup(sqlite, tmp_path / "sq.backup")
    restore(postgres, tmp_path / "pg.backup")
    restore(sqlite, tmp_path / "sq.backup")
    assert _names(postgres) == ["Grace"] and _names(sqlite) == ["Ada"]
