"""A database another process holds locked is waited on for one budget (LOCK_WAIT_S) for the
whole command, then named, exit code 3 (twenty-first sweep: `db backup` waited 61 s, the
30 s busy wait plus the 30 s copy wait, and `db restore` more than 30 s)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.ops import backup as backup_module
from felab_core.ops.backup import BackupUnreachable, backup, restore
from tests.ops.test_restore_checks import _live_file, good, live  # noqa: F401 (fixtures)

runner = CliRunner()
BUDGET = 2.0


@pytest.mark.parametrize("command", ["backup", "restore"])
def test_a_locked_database_is_waited_on_for_one_budget(
    live: str,  # noqa: F811 (the fixture)
    good: Path,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    monkeypatch.setattr(backup_module, "LOCK_WAIT_S", BUDGET)
    holder = sqlite3.connect(_live_file(live), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        with pytest.raises(BackupUnreachable, match=f"stayed locked .* for {BUDGET:.0f} s"):
            if command == "backup":
                backup(live, tmp_path / "while-locked.db")
            else:
                restore(live, good)
        waited = time.monotonic() - started
        assert BUDGET * 0.9 < waited < BUDGET * 1.4, waited
        args = [str(tmp_path / "cli.db")] if command == "backup" else [str(good), "--yes"]
        out = runner.invoke(app, ["db", command, *args])
        assert out.exit_code == 3, out.output
        assert f"for {BUDGET:.0f} s" in " ".join(out.output.split())
    finally:
        holder.execute("ROLLBACK")
        holder.close()
