"""Engines, sessions and schema upgrades: one way in for the bot, the workers, the CLI and tests.

The schema is only ever created by Alembic (`upgrade`), never by `create_all`, so a database made
on a laptop and one made in production have the same history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from felab_core.settings import get_settings

ROOT = Path(__file__).resolve().parents[2]


def migrations_root() -> Path:
    """The folder holding `alembic/` (with its env.py) and `alembic.ini`: the checkout felab
    runs from, or the working directory (the Docker image's /app). An installed felab's parent
    folder is site-packages, whose `alembic` is the library, not the migrations."""
    for base in (ROOT, Path.cwd()):
        if (base / "alembic" / "env.py").is_file():
            return base
    return ROOT


#: Seconds to open a PostgreSQL connection (libpq's connect_timeout: the whole handshake).
CONNECT_TIMEOUT_S = 5


class DatabaseError(RuntimeError):
    """The database cannot be used as it is; the message says what to run."""


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    """Foreign keys on, a busy wait, and transactions SQLAlchemy controls.

    Python's sqlite3 module opens transactions lazily, only before a write, so a SAVEPOINT
    issued first would become the outer transaction and its RELEASE would commit. Turning the
    module's own handling off and emitting BEGIN from SQLAlchemy (below) is the fix SQLAlchemy's
    documentation gives; savepoints then nest as they do on PostgreSQL.

    BEGIN IMMEDIATE takes the write lock up front: two sessions that both read and then write
    would otherwise deadlock (each holding a read lock the other's write waits on), and SQLite
    answers that with "database is locked" at once. Taken up front, the second session simply
    waits its turn (busy_timeout). One writer at a time is what an embedded database is for.
    """
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def _sqlite_begin(conn: Any) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE")


#: What SQLAlchemy's SQLite driver reads from a URL's query string.
SQLITE_URL_ARGUMENTS = frozenset(
    "timeout isolation_level detect_types check_same_thread cached_statements uri "
    "mode cache vfs nolock immutable modeof".split()
)
#: The arguments SQLite takes from a file: URI, which pysqlite builds only when uri=true.
_SQLITE_URI_ONLY = frozenset("mode cache vfs nolock immutable modeof".split())


def make_engine(url: str | None = None, **kwargs: Any) -> Engine:
    """An engine for `url` (default: the settings'); SQLite gets foreign keys and a busy wait."""
    url = url or get_settings().resolved_database_url()
    try:
        parsed = make_url(url)
        if parsed.host and "@" in parsed.host:  # the password's own @ split it: part in host
            raise ValueError("an @ in the host")
    except ValueError:  # a port that is not a number: often a password holding @ or :
        raise DatabaseError(
            "FELAB_DATABASE_URL is not a valid database URL: a password with @, : or / in it "
            "must be percent-encoded (%40, %3A, %2F); the form is "
            "postgresql+psycopg://USER:PASSWORD@HOST:5432/NAME"
        ) from None
    backend, driver = parsed.get_backend_name(), parsed.get_driver_name()
    if backend not in ("sqlite", "postgresql") or (backend == "postgresql" and driver != "psycopg"):
        raise DatabaseError(
            f"the database URL {parsed.render_as_string(hide_password=True)} names a driver "
            f"felab does not ship ({backend}+{driver}): use "
            "postgresql+psycopg://USER:PASSWORD@HOST:5432/NAME, or unset FELAB_DATABASE_URL "
            "for SQLite"
        )
    if backend == "sqlite":
        unknown = sorted(set(parsed.query) - SQLITE_URL_ARGUMENTS)
        if unknown:  # SQLAlchemy would only warn, and the value may be a secret: name keys only
            raise DatabaseError(
                f"FELAB_DATABASE_URL: SQLite takes no {', '.join(map(repr, unknown))} argument "
                f"(it takes {', '.join(sorted(SQLITE_URL_ARGUMENTS))}): remove it"
            )
        as_uri = sorted(set(parsed.query) & _SQLITE_URI_ONLY)
        if as_uri and str(parsed.query.get("uri", "")).lower() not in ("true", "1"):
            raise DatabaseError(  # pysqlite would ignore them with a warning: ro would not be
                f"FELAB_DATABASE_URL: SQLite reads {', '.join(map(repr, as_uri))} only with "
                "uri=true: add &uri=true, or remove it"
            )
        db = parsed.database
        if db and db != ":memory:" and not db.startswith("file:"):
            Path(db).parent.mkdir(parents=True, exist_ok=True)
    else:
        # a server that accepts and never answers fails the connection instead of hanging
        connect_args = dict(kwargs.pop("connect_args", {}))
        connect_args.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        kwargs["connect_args"] = connect_args
    engine = create_engine(url, **kwargs)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
    return engine


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded objects usable after commit (callers show them afterwards)."""
    return sessionmaker(engine, expire_on_commit=False)


def on_commit(session: Session, fn: Callable[[], None]) -> None:
    """Run `fn` once the session's current transaction commits (never if it rolls back):
    for what must not happen for work that is undone, such as counting a job as ended."""
    pending: list[Callable[[], None]] | None = session.info.get("felab.on_commit")
    if pending is None:
        pending = session.info["felab.on_commit"] = []

        def _run(sess: Session) -> None:
            todo = sess.info.pop("felab.on_commit", [])
            for f in todo:
                f()

        def _drop(sess: Session) -> None:
            sess.info.pop("felab.on_commit", None)

        event.listen(session, "after_commit", _run, once=True)
        event.listen(session, "after_rollback", _drop, once=True)
    pending.append(fn)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit when the block ends, roll back if it raises."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str) -> Any:
    """The Alembic configuration for the repository's `alembic/` folder, aimed at `url`."""
    from alembic.config import Config

    base = migrations_root()
    alembic_dir, alembic_ini = base / "alembic", base / "alembic.ini"
    if not (alembic_dir / "env.py").is_file():
        raise DatabaseError(
            f"the migrations folder {alembic_dir} is missing: install felab from a checkout "
            "(pip install -e .) so `alembic/` sits beside felab_core"
        )
    cfg = Config(str(alembic_ini)) if alembic_ini.exists() else Config()
    cfg.set_main_option("script_location", str(alembic_dir))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _run_alembic(engine: Engine, action: str, revision: str) -> None:
    """Run an Alembic command on one connection.

    On SQLite, foreign keys are switched off while migrations run: batch mode rebuilds a table
    by copying it and dropping the original, and with foreign keys on, that drop would cascade
    to every child row (the migration test catches exactly this). They are checked and switched
    back on afterwards.
    """
    from alembic import command

    cfg = alembic_config(engine.url.render_as_string(hide_password=False))
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        if sqlite:
            # Outside any transaction (the pragma is ignored inside one).
            assert raw is not None
            raw.execute("PRAGMA foreign_keys=OFF")
        cfg.attributes["connection"] = conn
        getattr(command, action)(cfg, revision)
        conn.commit()
        if sqlite:
            assert raw is not None
            broken = raw.execute("PRAGMA foreign_key_check").fetchall()
            raw.execute("PRAGMA foreign_keys=ON")
            if broken:
                raise DatabaseError(
                    f"the migration left rows pointing at missing rows: {broken[:5]}; restore "
                    "the database from its backup and report this"
                )


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run the migrations up to `revision` on the engine's database."""
    _run_alembic(engine, "upgrade", revision)


def downgrade(engine: Engine, revision: str) -> None:
    """Undo migrations down to `revision` ("base" empties the database)."""
    _run_alembic(engine, "downgrade", revision)


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None for one Alembic never touched."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    head = script.get_current_head()
    assert head is not None
    return head


def ensure_schema(engine: Engine, *, auto_upgrade: bool | None = None) -> None:
    """Make sure the schema is at head before use.

    The embedded SQLite database is upgraded on the spot (one machine, nothing to coordinate);
    a shared database such as PostgreSQL is never migrated behind an operator's back: it raises
    with the command to run instead.
    """
    if auto_upgrade is None:
        auto_upgrade = engine.dialect.name == "sqlite"
    current = current_revision(engine)
    if current == head_revision():
        return
    tables = inspect(engine).get_table_names()
    if auto_upgrade and current is None and tables:  # never write into another app's file
        shown = ", ".join(sorted(tables)[:5]) + (" ..." if len(tables) > 5 else "")
        raise DatabaseError(
            f"the database {engine.url.render_as_string(hide_password=True)} holds another "
            f"program's tables ({shown}) and no felab schema; felab keeps its own: point "
            "FELAB_DATABASE_URL at a new file or an empty database"
        )
    if auto_upgrade:
        upgrade(engine)
        return
    where = "empty" if not tables else f"at revision {current or 'none'}"
    raise DatabaseError(
        f"the database {engine.url.render_as_string(hide_password=True)} is {where}, not at the "
        f"latest schema ({head_revision()}): run `felab db upgrade` first"
    )


_factories: dict[str, sessionmaker[Session]] = {}


def default_sessions(url: str | None = None) -> sessionmaker[Session]:
    """The process-wide session factory for the configured database, schema checked once."""
    url = url or get_settings().resolved_database_url()
    factory = _factories.get(url)
    if factory is None:
        engine = make_engine(url)
        ensure_schema(engine)
        factory = session_factory(engine)
        _factories[url] = factory
    return factory
