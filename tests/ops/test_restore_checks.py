"""`felab db restore` checks an SQLite backup before it replaces anything: damaged pages, a
schema this felab does not know, a table or column missing or added, rows pointing at missing
rows, a value felab cannot read back. The live database is untouched."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import time as clock
from collections.abc import Iterator
from datetime import date, time
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.content.store import load_folder
from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.numbers.recording import create_job, record_entered
from felab_core.ops.backup import (
    BackupError,
    BackupUnreachable,
    backup,
    check_sqlite_backup,
    restore,
)
from felab_core.ops.backup_checks import _parts
from felab_core.people.members import add_member, create_cohort, set_hardware
from felab_core.settings import get_settings

runner = CliRunner()
CONTENT = Path(__file__).resolve().parents[2] / "content"


@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A felab database with a member in it, named by FELAB_DATABASE_URL."""
    url = f"sqlite:///{tmp_path / 'live.db'}"
    engine = make_engine(url)
    upgrade(engine)
    with session_scope(session_factory(engine)) as s:
        c = create_cohort(s, "C", timezone="UTC", start_date=date(2026, 3, 2), post_time=time(9))
        ada = add_member(s, c, "1", display_name="Ada")
        set_hardware(s, ada, bandwidth_gb_s=273)
        record_entered(s, ada, "ollama", "44.6")
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


def _refused_once_changed(url: str, made: Path, change: str, says: str) -> None:
    """Run the SQL `change` on a copy of the backup `made`: restoring the copy is refused, saying
    `says` (plain words, not a pattern) and that the file was changed after felab wrote it."""
    changed = _copy(made, "changed.db")
    con = sqlite3.connect(changed)
    con.executescript(change)
    con.commit()
    con.close()
    _refused(url, changed, re.escape(says) + ".*: it was changed after .* nothing was replaced")


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


def test_another_alembic_programs_file_is_no_felab_backup(live: str, tmp_path: Path) -> None:
    """Twentieth sweep (b) B19: it had been "made by a newer felab? upgrade felab first"."""
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.executescript(
        "CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY); "
        "INSERT INTO alembic_version VALUES ('abc123def'); CREATE TABLE orders (id INTEGER);"
    )
    con.commit()
    con.close()
    _refused(live, other, r"not a felab SQLite backup.*\(it holds orders, none of felab's tables")


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


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("UPDATE cohorts SET post_time = 'zz'", "cohorts.post_time of row 1 ('zz', not a time"),
        ("UPDATE cohorts SET start_date = 'notadate'", "cohorts.start_date of row 1 ('notadate'"),
        (
            "UPDATE cohorts SET manual_day = 'abc'",
            "cohorts.manual_day of row 1 ('abc', not a whole",
        ),
        (
            "UPDATE members SET joined_at = 'later'",
            "members.joined_at of row 1 ('later', not a date",
        ),
        ("UPDATE members SET public_numbers = 'yes'", "members.public_numbers of row 1 ('yes'"),
        ("UPDATE members SET bandwidth_gb_s = -5", "members.bandwidth_gb_s of row 1 (-5.0: felab"),
        (
            "UPDATE numbers SET value = 1e308",
            "numbers.value of row 1 (1e+308: felab keeps tokens/s",
        ),
        ("UPDATE numbers SET value = 9e999", "numbers.value of row 1 (inf, not a finite number)"),
        (
            "UPDATE numbers SET member_id = 999",
            "pointing at missing rows (numbers.member_id of row",
        ),
        ("CREATE TABLE extra (x)", "never makes (extra)"),
        ("ALTER TABLE members ADD COLUMN note TEXT", "never makes (members.note)"),
        # twentieth sweep (b) B2: nonsense fleet rows had been restored
        (
            "INSERT INTO workers (member_id, name, status, created_at) "
            "VALUES (1, 'mac', 'banana', '2026-03-02 09:00:00')",
            "workers row 1 (status",
        ),
        (
            "INSERT INTO bench_jobs (member_id, server, preset, status, created_at, "
            "progress_done, progress_total) VALUES (1, 'ollama', 'quick', 'ready', "
            "'2026-03-02 09:00:00', -5, 3)",
            "bench_jobs row 1 (progress_done",
        ),
        (
            "INSERT INTO bench_jobs (id, member_id, server, preset, status, created_at) VALUES "
            "(7, 1, 'ollama', 'quick', 'ready', '2026-03-02 09:00:00'); INSERT INTO "
            "bench_results (job_id, server, model, preset, concurrency, writing_tps_p50, row, "
            "created_at) VALUES (7, 'ollama', 'm', 'quick', 1, -1e9, '{}', '2026-03-02 09:00:00')",
            "bench_results row 1 (writing_tps_p50",
        ),
        # twentieth sweep (b) B12: Redis refuses '#zz', and `broker setup` blamed the port
        (
            "INSERT INTO broker_users (role, secret_hash, shared_secret, created_at) "
            "VALUES ('pairing', 'zz', 'pw', '2026-03-02 09:00:00')",
            "broker_users row 1 (secret_hash, not SHA-256 hex",
        ),
    ],
)
def test_a_backup_felab_could_not_read_is_refused(
    live: str, good: Path, change: str, says: str
) -> None:
    """Seventeenth sweep (b) H3: each was restored, and then every command stopped on an
    unexpected error (exit 70), or showed a machine of -5 GB/s."""
    _refused_once_changed(live, good, change, says)


def test_a_backup_with_content_and_jobs_restores(live: str, tmp_path: Path) -> None:
    """Every kind of value felab writes reads back: JSON, blobs, times, dates, booleans."""
    url = f"sqlite:///{tmp_path / 'full.db'}"
    engine = make_engine(url)
    upgrade(engine)
    with session_scope(session_factory(engine)) as s:
        load_folder(s, CONTENT)
        c = create_cohort(s, "C", timezone="UTC", start_date=date(2026, 3, 2), post_time=time(9))
        ada = add_member(s, c, "1", display_name="Ada")
        job = create_job(s, ada, "ollama", "quick")
        job.record, job.chart_png, job.params = {"runs": [{"c": 1}]}, b"\x89PNG\x00", {"n": 5}
    engine.dispose()
    done = backup(url, tmp_path / "full.bak")
    restore(live, done)
    with sqlite3.connect(_live_file(live)) as con:
        assert con.execute("SELECT count(*) FROM cards").fetchone()[0] > 0


@pytest.mark.parametrize(
    ("change", "said"),
    [
        # eighteenth sweep (b) M3: each member could then record one number, ever
        ("CREATE UNIQUE INDEX zz_one_number ON numbers (member_id)", r"\(index zz_one_number\)"),
        # (b) H5: words felab refuses when they are given
        ("UPDATE cohorts SET timezone = 'Not/AZone'", r"cohorts\.timezone of row 1 \('Not/AZone'"),
        ("UPDATE members SET timezone = 'Mars/Phobos'", r"members\.timezone of row 1"),
    ],
    ids=["unique-index", "cohort-zone", "member-zone"],
)
def test_an_index_or_a_word_felab_never_writes_is_refused(
    live: str, good: Path, change: str, said: str
) -> None:
    changed = _copy(good, "changed.db")
    con = sqlite3.connect(changed)
    con.execute(change)
    con.commit()
    con.close()
    _refused(live, changed, said)


def test_a_worker_name_felab_refuses_is_refused_in_a_backup(live: str, tmp_path: Path) -> None:
    """Eighteenth sweep (b) H5: a worker named with escape codes was restored as it was."""
    engine = make_engine(live)
    with session_scope(session_factory(engine)) as s:
        ada = s.scalars(select(m.Member)).one()
        s.add(m.Worker(member_id=ada.id, name="studio-mbp", public_key=None))
    engine.dispose()
    named = backup(live, tmp_path / "with-worker.db")
    assert check_sqlite_backup(named)  # the name as pairing writes it
    con = sqlite3.connect(named)
    con.execute("UPDATE workers SET name = ?", ("\x1b[31mRED\x1b[0m",))
    con.commit()
    con.close()
    _refused(live, named, r"workers\.name of row 1 \('\\x1b\[31mRED")


@pytest.mark.parametrize(
    ("remake", "says"),
    [
        ("ck_cohorts_advance", "table cohorts"),  # its CHECK dropped
        ("uq_cohorts_guild_id_channel_id", "table cohorts"),  # its UNIQUE dropped
    ],
)
def test_a_table_made_without_its_checks_is_refused(
    live: str, good: Path, remake: str, says: str
) -> None:
    """Twentieth sweep (b) B1: cohorts re-created without a CHECK or a UNIQUE passed (only
    columns and extra indexes were compared), with rows breaking them (advance 'banana'), and
    the live database kept the weakened table."""
    changed = _copy(good, "weakened.db")
    con = sqlite3.connect(changed)
    (sql,) = con.execute("SELECT sql FROM sqlite_master WHERE name = 'cohorts'").fetchone()
    sql = " ".join(sql.split())
    (part,) = [p for p in _parts(sql) if p.startswith(f"CONSTRAINT {remake} ")]
    weakened = sql.replace(f", {part}", "")
    assert weakened != sql
    con.executescript(
        "PRAGMA foreign_keys = OFF; PRAGMA legacy_alter_table = ON;"
        "ALTER TABLE cohorts RENAME TO cohorts_old;"
        f"{weakened};"
        "INSERT INTO cohorts SELECT * FROM cohorts_old; DROP TABLE cohorts_old;"
    )
    con.commit()
    con.close()
    _refused(live, changed, re.escape(says) + ".*: it was changed after .* nothing was replaced")


def test_a_database_locked_by_another_process_is_waited_on_then_named(
    live: str, good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twentieth sweep (b) B20: with another process holding SQLite's write lock, db backup
    and db restore waited in silence for good (SQLite's copy retries a busy database)."""
    from felab_core.ops import backup as backup_module

    monkeypatch.setattr(backup_module, "LOCK_WAIT_S", 0.5)
    holder = sqlite3.connect(_live_file(live), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = clock.monotonic()
        with pytest.raises(BackupUnreachable, match="stayed locked by another process"):
            backup(live, tmp_path / "while-locked.db")
        assert not (tmp_path / "while-locked.db").exists()
        with pytest.raises(BackupUnreachable, match="stayed locked by another process"):
            restore(live, good)
        assert clock.monotonic() - started < 20
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_database_felab_cannot_write_is_said_in_words(live: str, good: Path) -> None:
    """Twentieth sweep (b) B22: restoring into a database no one may write (chattr +i: the
    tests run as root) was 'a bug in felab', exit 70."""
    target = _live_file(live)
    if subprocess.run(["chattr", "+i", str(target)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available on this file system")
    try:
        _refused(live, good, "cannot write .*attempt to write a readonly database.*nothing was")
    finally:
        subprocess.run(["chattr", "-i", str(target)], check=True)
