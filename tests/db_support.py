"""Database fixtures: every service test runs on SQLite and on PostgreSQL.

PostgreSQL is the machine's own server (127.0.0.1:5432, trust auth, database `test`); each test
session works in a schema of its own, dropped at the end, so parallel runs and other projects
using `test` never collide. FELAB_TEST_POSTGRES_URL points elsewhere. When no PostgreSQL answers,
the PostgreSQL half is skipped with the command that starts it (scripts/test starts it first).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, time
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from felab_core.content.store import load_folder
from felab_core.db import models as m
from felab_core.db.session import make_engine, upgrade
from felab_core.people.members import add_member, create_cohort

ROOT = Path(__file__).resolve().parents[1]
CONTENT = ROOT / "content"
BACKENDS = ("sqlite", "postgresql")
_PG_CANDIDATES = (
    "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "postgresql+psycopg://root@127.0.0.1:5432/test",
)
_pg_base: str | bool | None = False  # False = not probed yet


def postgres_base_url() -> str | None:
    """A working PostgreSQL URL (no schema chosen yet), or None when none answers."""
    global _pg_base
    if _pg_base is not False:
        return _pg_base if isinstance(_pg_base, str) else None
    candidates = (
        [os.environ["FELAB_TEST_POSTGRES_URL"]] if "FELAB_TEST_POSTGRES_URL" in os.environ else []
    )
    _pg_base = None
    for url in [*candidates, *_PG_CANDIDATES]:
        try:
            eng = create_engine(url, connect_args={"connect_timeout": 3})
            with eng.connect() as conn:
                conn.execute(text("select 1"))
            eng.dispose()
            _pg_base = url
            break
        except Exception:
            continue
    return _pg_base if isinstance(_pg_base, str) else None


def _pg_or_skip() -> str:
    base = postgres_base_url()
    if base is None:
        pytest.skip(
            "PostgreSQL is not answering on 127.0.0.1:5432: start it with "
            "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`"
        )
    return base


def new_pg_schema_url() -> tuple[str, Callable[[], None]]:
    """A URL whose connections work in a fresh schema, and a function that drops it."""
    base = _pg_or_skip()
    schema = f"felab_t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})

    def drop() -> None:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()

    return url.render_as_string(hide_password=False), drop


def new_pg_database_url() -> tuple[str, Callable[[], None]]:
    """A URL to a whole PostgreSQL database of its own (pg_dump and pg_restore work on whole
    databases, not schemas), and a function that drops it. Skips without pg_dump."""
    base = _pg_or_skip()
    if shutil.which("pg_dump") is None:
        pytest.skip("needs PostgreSQL's client tools (pg_dump)")
    name = f"felab_bk_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return make_url(base).set(database=name).render_as_string(hide_password=False), drop


def empty_database_url(backend: str, tmp_path: Path) -> tuple[str, Callable[[], None]]:
    """A URL to a database with nothing in it, and a clean-up function."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'felab.db'}", lambda: None
    return new_pg_schema_url()


@pytest.fixture(params=BACKENDS)
def empty_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An engine on a database of its own with nothing in it, not migrated (a test that
    migrates it itself, step by step), per backend; dropped after the test."""
    url, drop = empty_database_url(request.param, tmp_path)
    engine = make_engine(url)
    yield engine
    engine.dispose()
    drop()


@pytest.fixture(scope="session", params=BACKENDS)
def db_engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """One migrated database per backend for the whole test session."""
    url, drop = empty_database_url(request.param, tmp_path_factory.mktemp("db"))
    engine = make_engine(url)
    upgrade(engine)
    yield engine
    engine.dispose()
    drop()


@pytest.fixture
def db(db_engine: Engine) -> Iterator[Session]:
    """A session whose work is rolled back after the test (services' savepoints still work)."""
    conn = db_engine.connect()
    trans = conn.begin()
    session = Session(bind=conn, join_transaction_mode="create_savepoint", expire_on_commit=False)
    try:
        yield session
    finally:
        session.close()
        trans.rollback()
        conn.close()


NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)  # a Tuesday


@pytest.fixture
def cohort(db: Session) -> m.Cohort:
    """A daily cohort in London that started on 2 March 2026 (so NOW is day 2)."""
    return create_cohort(
        db,
        "Spring",
        timezone="Europe/London",
        start_date=date(2026, 3, 2),
        post_time=time(9, 0),
        guild_id=f"g{uuid.uuid4().hex[:8]}",
        channel_id="c1",
    )


@pytest.fixture
def student(db: Session, cohort: m.Cohort) -> m.Member:
    return add_member(db, cohort, "1001", display_name="Ada", timezone="Europe/London")


@pytest.fixture
def instructor(db: Session, cohort: m.Cohort) -> m.Member:
    return add_member(db, cohort, "9001", role="instructor", display_name="Prof")


@pytest.fixture
def day2(db: Session) -> None:
    """The repository's own content packs, loaded."""
    load_folder(db, CONTENT)
