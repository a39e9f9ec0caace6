"""`felab db backup` and `felab db restore`: a cohort's server moved, on SQLite and on a fresh
PostgreSQL database, through the real commands."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.db import models as m
from felab_core.db.session import make_engine, session_factory, session_scope, upgrade
from felab_core.people.members import add_member, create_cohort
from felab_core.settings import get_settings
from tests.db_support import new_pg_database_url

runner = CliRunner()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'felab.db'}"
        drop = None
    else:
        url, drop = new_pg_database_url()

    monkeypatch.setenv("FELAB_DATABASE_URL", url)
    get_settings.cache_clear()
    engine = make_engine(url)
    upgrade(engine)
    engine.dispose()
    yield url
    get_settings.cache_clear()
    if drop is not None:
        drop()


def _names(url: str) -> list[str]:
    engine = make_engine(url)
    with session_scope(session_factory(engine)) as s:
        names = sorted(member.display_name for member in s.query(m.Member))
    engine.dispose()
    return names


def test_a_backup_restores_what_was_there(database: str, tmp_path: Path) -> None:
    engine = make_engine(database)
    with session_scope(session_factory(engine)) as s:
        c = create_cohort(s, "C", timezone="UTC", start_date=date(2026, 3, 2), post_time=time(9))
        add_member(s, c, "1", display_name="Ada")
    dump = tmp_path / "backups" / "felab.backup"
    out = runner.invoke(app, ["db", "backup", str(dump)])
    assert out.exit_code == 0, out.output
    assert dump.stat().st_size > 0 and "backed up to" in out.output
    with session_scope(session_factory(engine)) as s:  # after the backup, things change
        add_member(s, s.query(m.Cohort).one(), "2", display_name="Bob")
    engine.dispose()
    assert _names(database) == ["Ada", "Bob"]
    refused = runner.invoke(app, ["db", "restore", str(dump)])
    assert refused.exit_code == 2 and "--yes" in refused.output
    out = runner.invoke(app, ["db", "restore", str(dump), "--yes"])
    assert out.exit_code == 0, out.output
    assert "felab broker setup" in out.output
    assert _names(database) == ["Ada"]


def test_restoring_something_else_says_so(database: str, tmp_path: Path) -> None:
    junk = tmp_path / "junk.backup"
    junk.write_bytes(b"not a backup at all")
    out = runner.invoke(app, ["db", "restore", str(junk), "--yes"])
    assert out.exit_code == 2
    assert "not a felab" in out.output
    out = runner.invoke(app, ["db", "restore", str(tmp_path / "missing"), "--yes"])
    assert out.exit_code == 2 and "missing does not exist" in out.output
    out = runner.invoke(app, ["db", "restore", str(tmp_path / "missing")])  # said before --yes
    assert out.exit_code == 2 and "missing does not exist" in out.output
    out = runner.invoke(app, ["db", "restore", str(tmp_path), "--yes"])  # a folder
    assert out.exit_code == 2 and "is not a file" in out.output


def test_a_backup_replaces_an_earlier_backup_and_nothing_else(
    database: str, tmp_path: Path
) -> None:
    """Seventh sweep: `db backup FILE` silently turned any file (a member export, a content
    pack, the targets file) into a database. An earlier backup is replaced; anything else
    only with --force."""
    dump = tmp_path / "felab.backup"
    assert runner.invoke(app, ["db", "backup", str(dump)]).exit_code == 0
    again = runner.invoke(app, ["db", "backup", str(dump)])
    assert again.exit_code == 0, again.output
    export = tmp_path / "members.json"
    export.write_text('{"members": []}\n')
    refused = runner.invoke(app, ["db", "backup", str(export)])
    assert refused.exit_code == 2 and "is not a felab backup" in refused.output
    assert export.read_text() == '{"members": []}\n'
    forced = runner.invoke(app, ["db", "backup", str(export), "--force"])
    assert forced.exit_code == 0, forced.output
    assert export.read_bytes()[:5] in (b"SQLit", b"PGDMP")
    dash = runner.invoke(app, ["db", "backup", "-"])
    assert dash.exit_code == 2 and "not standard output" in dash.output


def test_a_text_file_beginning_pgdmp_is_not_an_earlier_backup(
    database: str, tmp_path: Path
) -> None:
    """Seventeenth sweep (b) L7: a 9-byte text file beginning "PGDMP" was replaced without
    --force, as if pg_dump had written it; pg_dump's header says more than its first 5 bytes."""
    note = tmp_path / "notes.txt"
    note.write_bytes(b"PGDMP me\n")
    refused = runner.invoke(app, ["db", "backup", str(note)])
    assert refused.exit_code == 2 and "is not a felab backup" in refused.output, refused.output
    assert note.read_bytes() == b"PGDMP me\n"
    assert runner.invoke(app, ["db", "backup", str(note), "--force"]).exit_code == 0


def test_another_data_folders_live_database_is_not_an_earlier_backup(
    database: str, tmp_path: Path
) -> None:
    """Eleventh sweep (H1): `db backup OTHER/felab.db` took another data folder's live
    database, an SQLite file like a backup, for an earlier backup and emptied it. Backups carry
    a mark; a restored database does not, so it is never taken for one either."""
    other = tmp_path / "other" / "felab.db"
    other.parent.mkdir()
    live = make_engine(f"sqlite:///{other}")
    upgrade(live)
    with session_scope(session_factory(live)) as s:
        c = create_cohort(s, "C", timezone="UTC", start_date=date(2026, 3, 2), post_time=time(9))
        add_member(s, c, "7", display_name="Grace")
    live.dispose()
    before = other.read_bytes()
    refused = runner.invoke(app, ["db", "backup", str(other)])
    assert refused.exit_code == 2, refused.output
    assert "did not write" in refused.output and "--force" in refused.output
    assert other.read_bytes() == before and _names(f"sqlite:///{other}") == ["Grace"]

    dump = tmp_path / "felab.backup"
    assert runner.invoke(app, ["db", "backup", str(dump)]).exit_code == 0
    assert runner.invoke(app, ["db", "backup", str(dump)]).exit_code == 0  # marked: replaced
    if database.startswith("sqlite"):
        restored = runner.invoke(app, ["db", "restore", str(dump), "--yes"])
        assert restored.exit_code == 0, restored.output
        live_file = Path(database.removeprefix("sqlite:///"))
        copy = tmp_path / "restored-live.db"
        copy.write_bytes(live_file.read_bytes())
        again = runner.invoke(app, ["db", "backup", str(copy)])
        assert again.exit_code == 2 and "did not write" in again.output
