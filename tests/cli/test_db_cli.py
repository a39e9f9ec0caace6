"""`felab db status` only reads: a mistyped FELAB_DATA_DIR or SQLite path is said, and no folder
or empty database is made (ninth sweep, M7); `felab db backup ""` says the name is empty, not
that "." is a folder (L7)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.settings import get_settings

runner = CliRunner()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv("FELAB_DATABASE_URL", raising=False)
    monkeypatch.setenv("FELAB_DATA_DIR", str(tmp_path / "x" / "typo"))
    get_settings.cache_clear()
    yield tmp_path / "x" / "typo"
    get_settings.cache_clear()


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_status_of_a_missing_database_makes_nothing(data_dir: Path, tmp_path: Path) -> None:
    done = runner.invoke(app, ["db", "status"])
    assert done.exit_code == 2, done.output
    assert done.stdout == ""
    assert (
        f"no database at {data_dir / 'felab.db'} (check FELAB_DATA_DIR or FELAB_DATABASE_URL); "
        "`felab db upgrade` creates it"
    ) in _flat(done.stderr)
    assert not (tmp_path / "x").exists()


def test_status_of_a_missing_file_named_in_the_url_makes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope" / "felab.db"
    monkeypatch.setenv("FELAB_DATABASE_URL", f"sqlite:///{missing}")
    get_settings.cache_clear()
    try:
        done = runner.invoke(app, ["db", "status"])
    finally:
        get_settings.cache_clear()
    assert done.exit_code == 2 and "no database at" in done.stderr
    assert not (tmp_path / "nope").exists()


def test_status_after_upgrade_still_reads(data_dir: Path) -> None:
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    done = runner.invoke(app, ["db", "status"])
    assert done.exit_code == 0 and "(current)" in done.stdout, done.output


def test_status_says_a_content_folder_that_is_not_there(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sweep 27 L: FELAB_CONTENT_DIR=/proc/nope was shown as the content folder, exit 0, with
    nothing said; `felab content load` then said it was not there."""
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    monkeypatch.setenv("FELAB_CONTENT_DIR", str(tmp_path / "nope"))  # (a file: a bad setting)
    get_settings.cache_clear()
    done = runner.invoke(app, ["db", "status"], env={"COLUMNS": "200"})
    said = _flat(done.stdout)
    assert done.exit_code == 0 and f"content folder: {tmp_path / 'nope'} (missing: check" in said
    monkeypatch.setenv("FELAB_CONTENT_DIR", str(tmp_path))
    get_settings.cache_clear()
    done = runner.invoke(app, ["db", "status"], env={"COLUMNS": "200"})
    assert f"content folder: {tmp_path}" in _flat(done.stdout) and "(missing" not in done.stdout


def test_status_of_a_newer_felabs_database_says_so(data_dir: Path) -> None:
    """Fourteenth sweep M7: schema 9999 was "behind: run felab db upgrade", exit 0, and the
    upgrade then refused it."""
    import sqlite3

    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    with sqlite3.connect(data_dir / "felab.db") as con:
        con.execute("UPDATE alembic_version SET version_num = '9999'")
    done = runner.invoke(app, ["db", "status"])
    assert done.exit_code == 2 and "behind" not in done.output
    assert "schema 9999, which this felab does not know" in _flat(done.stderr)


@pytest.mark.parametrize("args", [["db", "backup", ""], ["db", "restore", " ", "--yes"]])
def test_an_empty_file_name_is_said(data_dir: Path, tmp_path: Path, args: list[str]) -> None:
    done = runner.invoke(app, args)
    assert done.exit_code == 2, done.output
    assert "the file name is empty" in done.stderr and "is a folder" not in done.output
    assert not (tmp_path / "x").exists()


def _with_a_cohort(data_dir: Path) -> Path:
    """The data folder's database, with a cohort and this terminal's learner in it."""
    assert runner.invoke(app, ["numbers", "machine", "--bandwidth", "273"]).exit_code == 0
    return data_dir / "felab.db"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("UPDATE cohorts SET post_time = 'zz'", "cohorts.post_time of row 1 ('zz', not a time"),
        ("UPDATE cohorts SET start_date = 'x'", "cohorts.start_date of row 1 ('x', not a date)"),
        ("UPDATE cohorts SET created_at = 'later'", "cohorts.created_at of row 1 ('later', not"),
    ],
)
@pytest.mark.parametrize("args", [["status"], ["numbers", "show"], ["drill", "--list"]])
def test_a_stored_value_felab_cannot_read_is_named(
    data_dir: Path, change: str, says: str, args: list[str]
) -> None:
    """Seventeenth sweep (b) H3: a database changed by hand (or restored from such a backup)
    stopped every command on "unexpected error (ValueError: Invalid isoformat string)", 70."""
    import sqlite3

    with sqlite3.connect(_with_a_cohort(data_dir)) as con:
        con.execute(change)
    done = runner.invoke(app, args)
    assert done.exit_code == 2, done.output
    flat = _flat(done.stderr)
    assert f"holds a value felab cannot use: {says}" in flat, flat
    assert "felab db restore FILE --yes" in flat and "unexpected" not in flat


def test_a_bug_with_readable_values_is_still_a_bug(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a value that does not read is blamed: every stored value reading, a failure felab
    does not expect is still reported as a bug (exit 70)."""
    import felab.cli.numbers as numbers_cli

    _with_a_cohort(data_dir)

    def broken(*_args: object, **_kwargs: object) -> None:
        raise ValueError("a bug")

    monkeypatch.setattr(numbers_cli, "set_hardware", broken)
    done = runner.invoke(app, ["numbers", "machine", "--bandwidth", "200"])
    assert done.exit_code == 70, done.output
    assert "unexpected error (ValueError: a bug)" in _flat(done.stderr)


def test_a_long_restore_says_what_it_is_doing(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twentieth sweep (b) B18: a restore of 358 MB checked its rows for 33 s in silence; past a
    second it says, on stderr, what it is doing."""
    import time
    from functools import partial

    import felab.cli.db as db_cli
    import felab_core.ops.backup as backups
    from felab.cli.output import slow_note

    _with_a_cohort(data_dir)
    assert runner.invoke(app, ["db", "backup", str(tmp_path / "b.bak")]).exit_code == 0
    checked = backups.check_sqlite_backup

    def slow_check(source: Path) -> str:
        time.sleep(0.5)
        return checked(source)

    monkeypatch.setattr(backups, "check_sqlite_backup", slow_check)
    monkeypatch.setattr(db_cli, "slow_note", partial(slow_note, after_s=0.05))
    out = runner.invoke(app, ["db", "restore", str(tmp_path / "b.bak"), "--yes"])
    assert out.exit_code == 0, out.output
    assert "checking " in out.output and "before anything is replaced" in out.output


@pytest.mark.parametrize(
    ("revision", "orders", "says"),
    [
        ("abc123def", True, "holds another program's tables (orders) and its own schema version"),
        ("0015", True, "holds another program's tables (orders) and its own schema version"),
        ("0015", False, "is at schema 0015 but lacks felab's tables (bench_jobs"),
    ],
)
@pytest.mark.parametrize("args", [["db", "status"], ["db", "upgrade"], ["status"]])
def test_another_alembic_programs_database_is_not_felabs(
    data_dir: Path, revision: str, orders: bool, says: str, args: list[str]
) -> None:
    """Twentieth sweep (b) B19: another Alembic program's file had been "made by a newer
    felab? upgrade felab", and one at felab's revision with none of its tables "current"."""
    import sqlite3

    from felab_core.db.session import head_revision

    assert head_revision() == "0015"  # the cases above name the latest revision
    data_dir.mkdir(parents=True)
    with sqlite3.connect(data_dir / "felab.db") as con:
        con.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        con.execute("INSERT INTO alembic_version VALUES (?)", (revision,))
        if orders:
            con.execute("CREATE TABLE orders (id INTEGER)")
    done = runner.invoke(app, args)
    assert done.exit_code == 2, done.output
    assert says in _flat(done.output) and "newer felab" not in done.output
