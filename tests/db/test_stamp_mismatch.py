"""A database whose alembic_version stamp says an older revision than its tables (changed by
hand; twenty-second sweep, b B15) is said as such, exit 2, not exit 70."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.db.session import DatabaseError, make_engine, upgrade
from felab_core.settings import get_settings

runner = CliRunner()


def _stamped_back(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'stamped.db'}"
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    con = sqlite3.connect(tmp_path / "stamped.db")
    con.execute("UPDATE alembic_version SET version_num = '0013'")
    con.commit()
    con.close()
    return url


def test_a_stamp_behind_the_tables_is_said(tmp_path: Path) -> None:
    engine = make_engine(_stamped_back(tmp_path))
    try:
        with pytest.raises(DatabaseError, match="do not match its schema revision"):
            upgrade(engine)
    finally:
        engine.dispose()


def test_db_upgrade_on_it_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FELAB_DATABASE_URL", _stamped_back(tmp_path))
    get_settings.cache_clear()
    try:
        out = runner.invoke(app, ["db", "upgrade"])
    finally:
        get_settings.cache_clear()
    assert out.exit_code == 2, out.output
    assert "alembic_version" in " ".join(out.output.split())
