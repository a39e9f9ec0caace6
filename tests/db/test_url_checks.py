"""An SQLite FELAB_DATABASE_URL is checked before anything is opened or made: its arguments'
values, a fragment, a device or folder in place of a file, another program's database; and
`mode=ro&uri=true` opens the real file read-only, never a file named `felab.db?mode=ro`."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from felab_core.db.session import (
    DatabaseError,
    current_revision,
    downgrade,
    head_revision,
    make_engine,
    sqlite_file,
    upgrade,
)


def _felab(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FELAB_")}
    env.update(
        FELAB_DATA_DIR=str(tmp_path / "data"),
        FELAB_RESULTS_DIR=str(tmp_path / "results"),
        FELAB_CACHE_DIR=str(tmp_path / "cache"),
        FELAB_DATABASE_URL=url,
        HOME=str(tmp_path / "home"),
        COLUMNS="200",
        NO_COLOR="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "felab", *args], env=env, capture_output=True, text=True, timeout=120
    )


def _felab_db(path: Path) -> None:
    engine = make_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ("timeout=abc", "timeout"),
        ("timeout=-1", "timeout"),
        ("timeout=nan", "timeout"),
        ("timeout=inf", "timeout"),
        ("check_same_thread=maybe", "check_same_thread"),
        ("isolation_level=SERIALIZABLE", "isolation_level"),
        ("detect_types=9", "detect_types"),
        ("cached_statements=-5", "cached_statements"),
        ("uri=perhaps", "uri"),
        ("uri=true&mode=memory", "mode"),
        ("uri=true&mode=xyz", "mode"),
        ("uri=true&cache=weird", "cache"),
        ("uri=true&nolock=maybe", "nolock"),
        ("uri=true&immutable=2", "immutable"),
        ("uri=true&vfs=a%20b", "vfs"),
        ("timeout=1&timeout=2", "timeout"),
    ],
)
def test_a_bad_value_is_refused_naming_its_argument(tmp_path: Path, query: str, key: str) -> None:
    with pytest.raises(DatabaseError, match=f"'{key}'"):
        make_engine(f"sqlite:///{tmp_path / 'x.db'}?{query}")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "query",
    ["timeout=30", "timeout=0.5", "isolation_level=immediate", "check_same_thread=false",
     "detect_types=3", "cached_statements=64", "uri=true&mode=rwc&cache=private&nolock=0"],
)  # fmt: skip
def test_good_values_are_taken(tmp_path: Path, query: str) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}?{query}")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT 1")).scalar() == 1
    engine.dispose()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]


def test_a_fragment_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="fragment"):
        make_engine(f"sqlite:///{tmp_path / 'x.db'}#frag")
    with pytest.raises(DatabaseError, match="fragment"):
        make_engine(f"sqlite:///{tmp_path / 'x.db'}?mode=ro&uri=true#frag")
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
def test_a_device_or_folder_is_no_database(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="not a regular file"):
        make_engine("sqlite:////dev/null")
    with pytest.raises(DatabaseError, match="is a folder"):
        make_engine(f"sqlite:///{tmp_path}")


def test_read_only_opens_the_real_file(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    _felab_db(db)
    before = db.read_bytes()
    engine = make_engine(f"sqlite:///{db}?mode=ro&uri=true")
    assert current_revision(engine) == head_revision()
    with (
        pytest.raises(DatabaseError, match=r"opened read-only \(mode=ro"),
        engine.begin() as conn,
    ):
        conn.execute(text("DELETE FROM cohorts"))
    engine.dispose()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]  # no "x.db?mode=ro"
    assert db.read_bytes() == before


def test_read_only_needs_the_file_to_exist(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="does not exist"):
        make_engine(f"sqlite:///{tmp_path / 'sub' / 'x.db'}?mode=ro&uri=true")
    assert not list(tmp_path.iterdir())  # not even its folder


def test_a_file_uri_needs_uri_true(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="uri=true"):
        make_engine(f"sqlite:///file:{tmp_path / 'x.db'}")


def test_the_file_an_sqlite_url_names() -> None:
    assert sqlite_file("sqlite:////d/x.db?mode=ro&uri=true") == Path("/d/x.db")
    assert sqlite_file("sqlite:///file:/d/a%20b.db?mode=ro&uri=true") == Path("/d/a b.db")
    assert sqlite_file("sqlite:///file:///d/x.db?uri=true") == Path("/d/x.db")
    assert sqlite_file("sqlite://") is None


def test_a_path_with_odd_characters_works_with_uri(tmp_path: Path) -> None:
    db = tmp_path / "a%b c.db"
    _felab_db(db)
    engine = make_engine(f"sqlite:///{tmp_path / 'a%25b c.db'}?mode=ro&uri=true")
    assert current_revision(engine) == head_revision()
    engine.dispose()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a%b c.db"]


def test_cli_refuses_bad_values_with_exit_2(tmp_path: Path) -> None:
    for query in ("timeout=abc", "check_same_thread=maybe"):
        for args in (["db", "status"], ["numbers", "show"]):
            done = _felab(tmp_path, f"sqlite:///{tmp_path / 'x.db'}?{query}", *args)
            assert done.returncode == 2, done.stderr
            assert query.split("=")[0] in done.stderr and "Traceback" not in done.stderr


def test_cli_upgrade_refuses_another_programs_database(tmp_path: Path) -> None:
    photos = tmp_path / "photos.db"
    con = sqlite3.connect(photos)
    con.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")
    con.commit()
    con.close()
    before = photos.read_bytes()
    url = f"sqlite:///{photos}"
    done = _felab(tmp_path, url, "db", "upgrade")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "another program's tables (photos)" in done.stderr
    status = _felab(tmp_path, url, "db", "status")
    assert status.returncode == 2 and "another program's tables" in status.stderr
    assert "felab db upgrade" not in status.stdout + status.stderr
    assert photos.read_bytes() == before


def test_cli_read_only(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    engine = make_engine(f"sqlite:///{db}")
    upgrade(engine, "0005")  # behind: upgrading it would write
    engine.dispose()
    before = db.read_bytes()
    url = f"sqlite:///{db}?mode=ro&uri=true"
    status = _felab(tmp_path, url, "db", "status")
    assert status.returncode == 0 and "schema: 0005" in status.stdout, status.stderr
    done = _felab(tmp_path, url, "db", "upgrade")
    assert done.returncode == 2 and "opened read-only (mode=ro" in done.stderr, done.stderr
    assert db.read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if "?" in p.name]  # no "x.db?mode=ro"


def test_a_database_downgraded_to_base_is_still_felabs(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    _felab_db(db)
    engine = make_engine(f"sqlite:///{db}")
    downgrade(engine, "base")  # leaves an empty alembic_version
    engine.dispose()
    done = _felab(tmp_path, f"sqlite:///{db}", "db", "upgrade")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///{dir}/%00.db",
        "sqlite:///{dir}/a%0Ab.db",
        "sqlite:///file:{dir}/a%2500.db?uri=true",  # decoded twice: SQLite's URI
        "postgresql+psycopg://felab@127.0.0.1:5432/fe%00lab",
        "postgresql+psycopg://fe%0Alab@127.0.0.1:5432/felab",
        "postgresql+psycopg://felab:pass%00word@127.0.0.1:5432/felab",
    ],
)
def test_a_percent_encoded_control_character_is_refused(tmp_path: Path, url: str) -> None:
    """Seventeenth sweep (b) H2: %00 in the path had stopped felab on ValueError (exit 70)."""
    with pytest.raises(DatabaseError, match="control or invisible character written as %XX"):
        make_engine(url.format(dir=tmp_path / "never"))
    assert not (tmp_path / "never").exists()


def test_cli_says_a_percent_encoded_nul_with_exit_2(tmp_path: Path) -> None:
    for args in (["db", "status"], ["db", "upgrade"]):
        done = _felab(tmp_path, f"sqlite:///{tmp_path}/%00.db", *args)
        assert done.returncode == 2, done.stderr
        assert "written as %XX" in done.stderr and "unexpected" not in done.stderr
    assert not list(tmp_path.glob("*.db"))


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///file::memory:?uri=true",
        "sqlite:///file::memory:?cache=shared&uri=True",
        "sqlite:///file:%253Amemory%253A?uri=true",
        "sqlite:///file:?uri=true",  # no path: SQLite's temporary file, gone on close
        "sqlite:///file:x.db?mode=memory&uri=true",
        "sqlite:///:memory:",
        "sqlite://:memory:",  # L4: had been blamed on a port, with PostgreSQL's form
        "sqlite://",
    ],
)
def test_every_spelling_of_an_in_memory_database_is_refused(tmp_path: Path, url: str) -> None:
    """Seventeenth sweep (b) M1: file::memory: with uri=true had been taken, and a number
    'recorded' there was gone when the command ended."""
    for args in (["db", "upgrade"], ["numbers", "machine", "--bandwidth", "273"]):
        done = _felab(tmp_path, url, *args)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "in-memory SQLite database, which keeps nothing" in done.stderr


def test_a_file_uri_naming_a_file_is_kept(tmp_path: Path) -> None:
    done = _felab(tmp_path, f"sqlite:///file:{tmp_path / 'kept.db'}?uri=true", "db", "upgrade")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "kept.db").is_file()
