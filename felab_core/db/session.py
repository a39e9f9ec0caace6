"""Engines, sessions and schema upgrades: one way in for the bot, the workers, the CLI and tests.

The schema is only ever created by Alembic (`upgrade`), never by `create_all`, so a database made
on a laptop and one made in production have the same history.

Long because every way a database URL can be wrong (a driver felab does not ship, no host, a
pasted line, SQLite's URI options and read-only modes) is said here, where the engine is made,
beside the Alembic calls every entry point shares; moving the schema calls out would change the
import of `upgrade` in some sixty places.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.engine import URL, ExceptionContext, make_url
from sqlalchemy.exc import CircularDependencyError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from felab_core.db.stamp import STAMP_MISMATCH, stamp_mismatch
from felab_core.files import NamedFileError, make_folder_for, refuse_special
from felab_core.settings import get_settings
from felab_core.text import holds_hidden, with_hidden_shown

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


_BOOLEANS = {"true": True, "1": True, "yes": True, "on": True}
_BOOLEANS |= {"false": False, "0": False, "no": False, "off": False}


def _seconds(value: str) -> bool:
    try:
        number = float(value)
    except ValueError:
        return False
    return math.isfinite(number) and 0 <= number <= 86_400


#: What each SQLite URL argument takes: a test of its value, and the words for what it takes.
_SQLITE_VALUES: dict[str, tuple[Callable[[str], bool], str]] = {
    "timeout": (_seconds, "a number of seconds from 0 to 86400, such as 30"),
    "isolation_level": (
        lambda v: v.upper() in ("DEFERRED", "IMMEDIATE", "EXCLUSIVE"),
        "DEFERRED, IMMEDIATE or EXCLUSIVE",
    ),
    "detect_types": (lambda v: v in ("0", "1", "2", "3"), "0, 1, 2 or 3"),
    "check_same_thread": (lambda v: v.lower() in _BOOLEANS, "true or false"),
    "cached_statements": (
        lambda v: re.fullmatch(r"[0-9]{1,6}", v) is not None,
        "a whole number from 0 to 999999, such as 128",
    ),
    "uri": (lambda v: v.lower() in _BOOLEANS, "true or false"),
    "mode": (
        lambda v: v in ("ro", "rw", "rwc"),
        "ro, rw or rwc (felab keeps its data in a file, so not memory)",
    ),
    "cache": (lambda v: v in ("shared", "private"), "shared or private"),
    "vfs": (
        lambda v: re.fullmatch(r"[A-Za-z0-9_-]{1,64}", v) is not None,
        "the name of an SQLite VFS, such as unix-dotfile",
    ),
    "nolock": (lambda v: v.lower() in _BOOLEANS, "true or false"),
    "immutable": (lambda v: v.lower() in _BOOLEANS, "true or false"),
    "modeof": (lambda v: Path(v).exists(), "the path of an existing file"),
}


def _flag(parsed: URL, key: str) -> bool:
    value = parsed.query.get(key)
    return isinstance(value, str) and _BOOLEANS.get(value.lower(), False)


def _check_sqlite_query(parsed: URL) -> None:
    """Refuse what SQLite or its Python driver would not take from the URL's query string:
    an argument they do not know, one given twice, a value they cannot read. Keys are named,
    values never repeated (an unknown argument may be a secret)."""
    unknown = sorted(set(parsed.query) - SQLITE_URL_ARGUMENTS)
    if unknown:  # SQLAlchemy would only warn, and the value may be a secret: name keys only
        raise DatabaseError(
            f"FELAB_DATABASE_URL: SQLite takes no {', '.join(map(repr, unknown))} argument "
            f"(it takes {', '.join(sorted(SQLITE_URL_ARGUMENTS))}): remove it"
        )
    for key, value in sorted(parsed.query.items()):
        if not isinstance(value, str):
            raise DatabaseError(f"FELAB_DATABASE_URL gives SQLite's {key!r} twice: keep one")
        ok, takes = _SQLITE_VALUES[key]
        if not ok(value):
            raise DatabaseError(
                f"FELAB_DATABASE_URL: SQLite's {key!r} takes {takes}: fix it, or remove it"
            )
    as_uri = sorted(set(parsed.query) & _SQLITE_URI_ONLY)
    if as_uri and not _flag(parsed, "uri"):
        raise DatabaseError(  # pysqlite would ignore them with a warning: ro would not be
            f"FELAB_DATABASE_URL: SQLite reads {', '.join(map(repr, as_uri))} only with "
            "uri=true: add &uri=true, or remove it"
        )


def sqlite_file(url: str | URL) -> Path | None:
    """The file an SQLite URL names, as SQLite opens it (a file: URI's path decoded when
    uri=true), or None for an in-memory database."""
    parsed = make_url(url) if isinstance(url, str) else url
    db = parsed.database or ""
    if db.startswith("file:") and _flag(parsed, "uri"):
        db = db.removeprefix("file:")
        if db.startswith("//"):  # file://localhost/path or file:///path: the host is dropped
            db = "/" + db[2:].partition("/")[2]
        db = unquote(db.partition("?")[0])
    if not db or db == ":memory:":
        return None
    return Path(db)


def sqlite_read_only(url: str | URL) -> str | None:
    """What opens an SQLite URL read-only (`mode=ro` or `immutable=1`), or None."""
    parsed = make_url(url) if isinstance(url, str) else url
    if not _flag(parsed, "uri"):
        return None
    if parsed.query.get("mode") == "ro":
        return "mode=ro"
    return "immutable=1" if _flag(parsed, "immutable") else None


def _from_data_dir(url: str) -> bool:
    """Whether `url` is the embedded database under FELAB_DATA_DIR (whose folder's name may
    hold a #), not one written in FELAB_DATABASE_URL."""
    try:
        settings = get_settings()
    except Exception:  # a bad setting is reported where it is read
        return False
    return not settings.database_url and url == settings.resolved_database_url()


def _sqlite_url(url: str, parsed: URL, *, create: bool = True) -> URL:
    """The SQLite URL checked, its folder made (unless not `create`: a command that only
    reads, such as `db status`, makes nothing), and with uri=true its path as a file: URI.

    With uri=true, SQLAlchemy's driver appends the URI arguments to the path as it is, and
    SQLite reads a path as a URI only when it starts with file:, so /data/felab.db?mode=ro
    would open (and create) a file named `felab.db?mode=ro`: the path is rewritten."""
    if "#" in url and not _from_data_dir(url):  # SQLite would make it part of the file name
        raise DatabaseError(
            "FELAB_DATABASE_URL holds a # (a URL fragment), which SQLite would make part of "
            "the file's name: remove it (write a # in a file name as %23)"
        )
    _check_sqlite_query(parsed)
    uri = _flag(parsed, "uri")
    db = parsed.database or ""
    if db.startswith("file:") and not uri:
        raise DatabaseError(
            "FELAB_DATABASE_URL: a file: path is read as a URI only with uri=true: add "
            "?uri=true, or give the plain path (sqlite:////path/felab.db)"
        )
    path = sqlite_file(parsed)
    if path is None:
        return parsed
    try:
        refuse_special(path, what="SQLite database, such as felab.db", to_write=True)
    except NamedFileError as exc:
        raise DatabaseError(f"{exc}; check FELAB_DATABASE_URL or FELAB_DATA_DIR") from None
    existing_only = sqlite_read_only(parsed) or (
        "mode=rw" if uri and parsed.query.get("mode") == "rw" else None
    )
    if existing_only:
        if not path.exists():
            raise DatabaseError(
                f"the SQLite database {path} does not exist, and {existing_only} in "
                "FELAB_DATABASE_URL opens an existing file only: fix the path, or create it "
                f"with `felab db upgrade` without {existing_only}"
            )
    elif create and _from_data_dir(url):  # felab's own folder: made whole, as any app's
        path.parent.mkdir(parents=True, exist_ok=True)
    elif create:
        try:
            make_folder_for(path, what="SQLite database")
        except NamedFileError as exc:
            raise DatabaseError(f"{exc}; check FELAB_DATABASE_URL") from None
    if uri and not db.startswith("file:"):
        parsed = parsed.set(database="file:" + quote(str(path.absolute()), safe="/"))
    return parsed


def _read_only_errors(engine: Engine, why: str, shown: str) -> None:
    """A write to a database opened read-only fails with one line saying so."""

    def _refuse(ctx: ExceptionContext) -> None:
        orig = ctx.original_exception
        if isinstance(orig, sqlite3.OperationalError) and "readonly database" in str(orig):
            raise DatabaseError(
                f"cannot write to {shown}: the database was opened read-only ({why} in "
                f"FELAB_DATABASE_URL); this command writes, so run it without {why}"
            ) from None

    event.listen(engine, "handle_error", _refuse)


def _url_problem(url: str) -> str:
    """What makes `url` no URL, in words: a password's own @, : or /, an unclosed [, a port
    that is not a number. Never the password itself."""
    password = "a password with @, : or / in it must be percent-encoded (%40, %3A, %2F)"
    rest = url.partition("://")[2]
    address = rest.split("/", 1)[0]
    user_info = address.rpartition("@")[0]
    if address.count("@") > 1 or user_info.count(":") > 1 or ("@" not in address and "@" in rest):
        return password
    try:
        urlsplit(url).port  # noqa: B018 - what it refuses is the answer
    except ValueError as exc:
        if "IPv6" in str(exc):
            return "an IPv6 address needs its closing ] (such as [::1]:5432)"
        return "the port after the host is not a number from 1 to 65535"
    return password


def _refuse_encoded_hidden(parsed: URL) -> None:
    """Refuse a control or invisible character written percent-encoded (%00, %0A) in a URL's
    user, host or database, or in an SQLite file: URI's path: a NUL stopped felab on an
    unexpected error, a line break named a file or database nobody meant."""
    parts = [parsed.username, parsed.host, parsed.database]
    if parsed.get_backend_name() == "sqlite":
        parts.append(str(sqlite_file(parsed) or ""))
    if any(part and holds_hidden(part) for part in parts) or "\x00" in (parsed.password or ""):
        raise DatabaseError(
            "FELAB_DATABASE_URL holds a control or invisible character written as %XX (such as "
            "%00 or %0A) in its user, password, host, database or path: remove it, and write "
            "the URL again plainly"
        )


def make_engine(url: str | None = None, *, create: bool = True, **kwargs: Any) -> Engine:
    """An engine for `url` (default: the settings'); SQLite gets foreign keys and a busy wait,
    and its folder made unless not `create` (the file itself is made on first connect)."""
    url = url or get_settings().resolved_database_url()
    if url != url.strip() or holds_hidden(url):  # 'x.db ' or a tab made a file of that name
        raise DatabaseError(
            "FELAB_DATABASE_URL holds spaces at an end, or control or invisible characters "
            "(a pasted line?): write it again plainly, such as "
            "postgresql+psycopg://USER:PASSWORD@HOST:5432/NAME"
        )
    try:
        parsed = make_url(url)
        if parsed.host and "@" in parsed.host:  # the password's own @ split it: part in host
            raise ValueError("an @ in the host")
    except ValueError:  # a port that is not a number: often a password holding @ or :
        raise DatabaseError(
            f"FELAB_DATABASE_URL is not a valid database URL: {_url_problem(url)}; the form is "
            "postgresql+psycopg://USER:PASSWORD@HOST:5432/NAME"
        ) from None
    _refuse_encoded_hidden(parsed)
    if parsed.port is not None and not 1 <= parsed.port <= 65535:  # 0: libpq takes 5432
        raise DatabaseError(
            "FELAB_DATABASE_URL has a port outside 1-65535: give the server's port (PostgreSQL "
            "listens on 5432), or leave it out"
        )
    backend, driver = parsed.get_backend_name(), parsed.get_driver_name()
    if (backend, driver) not in (("sqlite", "pysqlite"), ("postgresql", "psycopg")):
        raise DatabaseError(
            f"the database URL {parsed.render_as_string(hide_password=True)} names a driver "
            f"felab does not ship ({backend}+{driver}): use "
            "postgresql+psycopg://USER:PASSWORD@HOST:5432/NAME, or unset FELAB_DATABASE_URL "
            "for SQLite"
        )
    has_host = bool(parsed.host) or "host" in parsed.query  # ?host=/run/postgresql: a socket
    if backend == "postgresql" and not (parsed.database and has_host):
        raise DatabaseError(  # libpq's defaults had reached a database nobody named
            f"the database URL {parsed.render_as_string(hide_password=True)} names no "
            f"{'host' if parsed.database else 'database'}: give the host and the database's "
            "name, as "
            "postgresql+psycopg://USER:PASSWORD@HOST:5432/NAME"
        )
    target: str | URL = url
    if backend == "sqlite":
        target = _sqlite_url(url, parsed, create=create)
    else:
        # a server that accepts and never answers fails the connection instead of hanging
        connect_args = dict(kwargs.pop("connect_args", {}))
        connect_args.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        kwargs["connect_args"] = connect_args
    engine = create_engine(target, **kwargs)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        why = sqlite_read_only(engine.url)
        if why:
            _read_only_errors(engine, why, parsed.render_as_string(hide_password=True))
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
        try:
            getattr(command, action)(cfg, revision)
        except (CircularDependencyError, OperationalError) as exc:
            if not stamp_mismatch(exc):
                raise
            conn.rollback()
            if sqlite:
                assert raw is not None
                raw.execute("PRAGMA foreign_keys=ON")
            raise DatabaseError(STAMP_MISMATCH.format(url=engine.url)) from None
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
    """The revision the database is at, or None for one Alembic never touched (or downgraded
    to base: the table is there, empty).

    Read as rows, not through Alembic's get_current_revision: two rows, a NULL or a number in
    alembic_version (a file changed by hand, or another program's) made Alembic raise an error
    of its own, or read as "empty" and had felab's tables written in beside it."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        heads = MigrationContext.configure(conn).get_current_heads()
    if not heads:
        return None
    first = heads[0]
    if len(heads) == 1 and isinstance(first, str) and first.strip() and not holds_hidden(first):
        return first
    if len(heads) > 1:
        held = f"{len(heads)} rows"
    elif first is None:
        held = "an empty (NULL) row"
    elif isinstance(first, int | float):
        held = f"the number {str(first)[:20]}"
    else:
        held = "a blank or unprintable name"
    raise DatabaseError(
        f"the database {engine.url.render_as_string(hide_password=True)} has a damaged schema "
        f"record (alembic_version holds {held}, not one revision name): changed by hand, or "
        "not felab's; restore a backup (`felab db restore FILE --yes`), or point "
        "FELAB_DATABASE_URL / FELAB_DATA_DIR at felab's own database"
    )


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    head = script.get_current_head()
    assert head is not None
    return head


def known_revisions() -> set[str]:
    """This felab's migrations (a database at another revision was made by a newer felab)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return {rev.revision for rev in script.walk_revisions()}


def refuse_foreign(
    engine: Engine, current: str | None = None, tables: list[str] | None = None
) -> None:
    """Refuse a database that holds tables but no felab schema (no alembic_version): another
    program's file, which felab must never write its tables into. Also one whose alembic_version
    names a revision but that holds none of felab's tables (another Alembic program's file), or,
    at the latest revision, lacks some of them: each had been "made by a newer felab? upgrade
    felab" or "schema current" (twentieth sweep, b B19)."""
    from felab_core.db.models import Base

    if current is None:
        current = current_revision(engine)
    tables = inspect(engine).get_table_names() if tables is None else tables
    others = sorted(t for t in tables if t != "alembic_version" and t not in Base.metadata.tables)
    shown = ", ".join(with_hidden_shown(t)[:40] for t in others[:5])
    shown += " ..." if len(others) > 5 else ""
    where = engine.url.render_as_string(hide_password=True)
    if current is None:
        held = sorted(t for t in tables if t != "alembic_version")  # felab's own, at base
        if held:
            listed = ", ".join(held[:5]) + (" ..." if len(held) > 5 else "")
            raise DatabaseError(
                f"the database {where} holds another program's tables ({listed}) and no felab "
                "schema; felab keeps its own: point FELAB_DATABASE_URL at a new file or an "
                "empty database"
            )
        return
    ours = [t for t in tables if t in Base.metadata.tables]
    revision = with_hidden_shown(current)[:40]
    if others and not ours:
        raise DatabaseError(
            f"the database {where} holds another program's tables ({shown}) and its own "
            f"schema version {revision}, none of felab's: it is not felab's database; point "
            "FELAB_DATABASE_URL / FELAB_DATA_DIR at felab's own database, a new file or an "
            "empty database"
        )
    missing = sorted(set(Base.metadata.tables) - set(tables))
    if current == head_revision() and missing:
        lacks = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise DatabaseError(
            f"the database {where} is at schema {revision} but lacks felab's tables ({lacks}): "
            "changed by hand, or not felab's; restore a backup (`felab db restore FILE --yes`), "
            "or point FELAB_DATABASE_URL / FELAB_DATA_DIR at felab's own database"
        )


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
        if engine.dialect.name == "sqlite":  # "current", yet without felab's tables (B19)
            refuse_foreign(engine, current)
        return
    tables = inspect(engine).get_table_names()
    if auto_upgrade:
        refuse_foreign(engine, current, tables)  # never write into another app's file
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
