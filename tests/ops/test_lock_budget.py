"""A locked SQLite database (twenty-second sweep, b B8, B9): `db backup` and `db restore` count
their lock wait from the command's start, so the message comes well inside 30 s, and any other
command says the database is locked by another process, not that it is unreachable."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from felab_core.failures import explain
from felab_core.ops import backup as backup_module
from felab_core.ops.backup import BackupUnreachable, backup, process_started, restore
from tests.ops.test_restore_checks import _live_file, good, live  # noqa: F401 (fixtures)


def test_the_process_started_before_now() -> None:
    assert process_started() <= time.monotonic()


@pytest.mark.parametrize("command", ["backup", "restore"])
def test_the_lock_wait_counts_from_the_commands_start(
    live: str,  # noqa: F811 (the fixture)
    good: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
    command: str,
) -> None:
    assert backup_module.LOCK_WAIT_S <= 20  # with start-up, well inside `timeout 30`
    holder = sqlite3.connect(_live_file(live), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        begun = time.monotonic()
        started = begun - (backup_module.LOCK_WAIT_S - 1)  # a start-up that took most of it
        with pytest.raises(BackupUnreachable, match="locked by another process"):
            if command == "backup":
                backup(live, tmp_path / "while-locked.db", started=started)
            else:
                restore(live, good, started=started)
        assert time.monotonic() - begun < 4
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_locked_database_is_said_as_locked(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.1})
    try:
        with pytest.raises(OperationalError) as caught, engine.connect() as conn:
            conn.execute(text("SELECT * FROM t"))
        failure = explain(caught.value)
        assert failure is not None
        assert failure.exit_code == 3
        assert "locked by another process" in failure.message
        assert "reachable" not in failure.message
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        engine.dispose()
