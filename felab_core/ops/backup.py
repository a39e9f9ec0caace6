"""Backing up and restoring felab's database, SQLite or PostgreSQL, to move a cohort's server.

SQLite: SQLite's own online backup (consistent while the bot and the ingest run). PostgreSQL:
`pg_dump --format=custom` and `pg_restore --clean`, the tools that come with PostgreSQL's
client (their major version must be the server's or newer). Redis needs no backup: it carries
messages (a lost one is sent again) and users (made again from the database by
`felab broker setup` or the ingest).
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from felab_core.engine.results import ResultsFileError, check_destinations
from felab_core.errors import Invalid
from felab_core.files import (
    SQLITE_DATABASE,
    NamedFileError,
    broken_link,
    make_folder_for,
    refuse_special,
)
from felab_core.redact import redact
from felab_core.text import with_hidden_shown


class BackupError(Invalid):
    """A backup or restore could not be made; the message says why and what to do."""


class BackupUnreachable(BackupError):
    """The database server could not be reached for the backup (exit code 3)."""


def _libpq(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as libpq wants it (no driver name)."""
    parsed = make_url(url).set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(
            f"{name} is not installed: install PostgreSQL's client tools (Debian: "
            "postgresql-client) or run this inside the Compose stack"
        )
    return found


def _sqlite_path(url: str) -> Path:
    """The file an SQLite URL names (a file: URI's path when uri=true)."""
    from felab_core.db.session import sqlite_file

    database = sqlite_file(url)
    if database is None:
        raise BackupError("an in-memory SQLite database cannot be backed up")
    return database


def _open_read_only(path: Path) -> sqlite3.Connection:
    """`path` opened read-only: a backup is read, never changed, by checking it."""
    return sqlite3.connect(f"file:{quote(str(path.absolute()), safe='/')}?mode=ro", uri=True)


def _schema_of(con: sqlite3.Connection) -> dict[str, set[str]]:
    """Each table's columns."""
    tables = [
        row[0]
        for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    ]
    return {
        t: {row[1] for row in con.execute(f"PRAGMA table_info({_quoted(t)})").fetchall()}
        for t in tables
    }


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _indexes_of(con: sqlite3.Connection) -> frozenset[tuple[str, str]]:
    """Each index's name and its SQL, spaces folded (SQLite's own, for a UNIQUE, has none)."""
    rows = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").fetchall()
    return frozenset((str(name), " ".join(str(sql or "").split())) for name, sql in rows)


@lru_cache(maxsize=4)
def _expected(revision: str) -> tuple[dict[str, frozenset[str]], frozenset[tuple[str, str]]]:
    """The tables and columns, and the indexes, felab's migrations make up to `revision` (on
    a scratch file; kept, since this felab's migrations make the same every time)."""
    from felab_core.db.session import make_engine, upgrade

    with tempfile.TemporaryDirectory(prefix="felab-restore-") as scratch:
        engine = make_engine(f"sqlite:///{Path(scratch) / 'expected.db'}")
        try:
            upgrade(engine, revision)
        finally:
            engine.dispose()
        con = _open_read_only(Path(scratch) / "expected.db")
        try:
            tables = {t: frozenset(columns) for t, columns in _schema_of(con).items()}
            return tables, _indexes_of(con)
        finally:
            con.close()


def check_sqlite_backup(source: Path) -> str:
    """Check an SQLite backup before anything is replaced with it: SQLite's integrity check
    passes, its schema revision is one this felab knows, and it holds every table and column
    felab's migrations make up to that revision. Its revision; BackupError saying what is
    wrong otherwise."""
    not_felab = f"{source} is not a felab SQLite backup: give the file `felab db backup` wrote"
    try:
        con = _open_read_only(source)
    except sqlite3.Error:
        raise BackupError(not_felab) from None
    try:
        try:
            problems = [row[0] for row in con.execute("PRAGMA integrity_check(5)").fetchall()]
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc) or "encrypted" in str(exc):
                raise BackupError(not_felab) from None
            problems = [str(exc)]
        if problems != ["ok"]:
            said = str(problems[0] if problems else "no answer")
            first = " ".join(said.replace("*** in database main ***", "").split())[:200]
            raise BackupError(
                f"{source} is damaged (SQLite's integrity check: {first}): nothing was "
                "replaced; restore from another backup"
            )
        try:
            held = _schema_of(con)
            if "alembic_version" not in held:
                raise BackupError(f"{not_felab} (it has no alembic_version table)")
            added = con.execute(  # felab makes none: a trigger would run on felab's next write
                "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view') LIMIT 3"
            ).fetchall()
            if added:
                shown = ", ".join(
                    f"{kind} {with_hidden_shown(str(name))[:40]}" for kind, name in added
                )
                raise BackupError(
                    f"{source} holds what felab's schema never makes ({shown}): it was changed "
                    "after `felab db backup` wrote it; nothing was replaced, restore another backup"
                )
            revisions = [row[0] for row in con.execute("SELECT version_num FROM alembic_version")]
            indexes = _indexes_of(con)
        except sqlite3.DatabaseError as exc:
            raise BackupError(f"{source} cannot be read ({exc}): restore another backup") from None
    finally:
        con.close()
    if len(revisions) != 1 or not isinstance(revisions[0], str):
        raise BackupError(
            f"{not_felab} (its alembic_version holds {len(revisions)} revisions, not one)"
        )
    revision = revisions[0]
    from felab_core.db.session import known_revisions

    if revision not in known_revisions():
        raise BackupError(
            f"{source} is at schema revision {revision[:40]!r}, which this felab does not know "
            "(made by a newer felab?): upgrade felab first, then restore it; nothing was replaced"
        )
    missing = []
    expected, expected_indexes = _expected(revision)
    for table, columns in sorted(expected.items()):
        if table not in held:
            missing.append(f"table {table}")
        else:
            missing += [f"{table}.{c}" for c in sorted(columns - held[table])]
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise BackupError(
            f"{source} lacks what felab's schema {revision} has ({shown}): it was changed "
            "after `felab db backup` wrote it; nothing was replaced, restore another backup"
        )
    _check_rows(source, held, expected)
    extra = sorted(name for name, sql in indexes - expected_indexes)
    if extra:  # a UNIQUE index of its own had let each member record one number, ever
        shown = ", ".join(f"index {with_hidden_shown(name)[:40]}" for name in extra[:3])
        raise BackupError(
            f"{source} holds what felab's schema never makes ({shown}): it was changed after "
            "`felab db backup` wrote it; nothing was replaced, restore another backup"
        )
    return revision


def _check_rows(
    source: Path, held: dict[str, set[str]], expected: dict[str, frozenset[str]]
) -> None:
    """Refuse a backup holding what felab's schema never makes (a table or column of its own),
    rows pointing at missing rows, or a value felab cannot read back (felab_core.db.readable):
    each had been restored silently, and every command then stopped on an unexpected error."""
    added = [t for t in held if t not in expected and not t.startswith("sqlite_")]
    added += [f"{t}.{c}" for t in expected if t in held for c in sorted(held[t] - expected[t])]
    if added:
        shown = ", ".join(with_hidden_shown(a)[:60] for a in sorted(added)[:3])
        problem = f"holds what felab's schema never makes ({shown})"
    else:
        try:
            problem = _broken_links(source) or _unreadable(source) or _unusable_words(source)
        except (sqlite3.Error, DBAPIError) as exc:
            raise BackupError(f"{source} cannot be read ({exc}): restore another backup") from None
    if problem:
        raise BackupError(
            f"{source} {problem}: it was changed after `felab db backup` wrote it, or is "
            "damaged; nothing was replaced, restore another backup"
        )


def _broken_links(source: Path) -> str:
    """SQLite's foreign key check, in words: the first row pointing at a missing row."""
    con = _open_read_only(source)
    try:
        broken = con.execute("PRAGMA foreign_key_check").fetchmany(1)
        if not broken:
            return ""
        child, rowid, parent, fk = broken[0]
        links = con.execute(f"PRAGMA foreign_key_list({_quoted(child)})").fetchall()
        column = next((link[3] for link in links if link[0] == fk), "?")
    finally:
        con.close()
    return f"holds rows pointing at missing rows ({child}.{column} of row {rowid}: not in {parent})"


def _unreadable(source: Path) -> str:
    """The first values felab could not read back from the backup, in words."""
    from sqlalchemy import create_engine

    from felab_core.db.readable import unreadable_values

    engine = create_engine("sqlite://", creator=lambda: _open_read_only(source))
    try:
        with engine.connect() as conn:
            found = unreadable_values(conn, limit=3)
    finally:
        engine.dispose()
    if not found:
        return ""
    return "holds values felab cannot use: " + "; ".join(map(str, found))


#: Words felab checks whenever it stores them, and the check: a backup's value that fails one
#: was restored, and `felab status` then stopped asking for "an IANA name" no one had given.
_WORD_CHECKS = (("cohorts", "timezone"), ("members", "timezone"), ("workers", "name"))


def _unusable_words(source: Path) -> str:
    """The first stored word felab would have refused when it was written, in words."""
    from felab_core.content.calendar import zone
    from felab_core.jobs.keys import check_worker_name

    check = {"timezone": zone, "name": check_worker_name}
    con = _open_read_only(source)
    try:
        for table, column in _WORD_CHECKS:
            query = f"SELECT id, {_quoted(column)} FROM {_quoted(table)} ORDER BY id"
            for row_id, word in con.execute(query):
                try:
                    check[column](str(word))
                except Invalid:
                    shown = with_hidden_shown(repr(str(word)[:40]))
                    return (
                        f"holds values felab cannot use: {table}.{column} of row {row_id} "
                        f"({shown}, which felab refuses when it is given)"
                    )
    finally:
        con.close()
    return ""


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


#: The first bytes of the two kinds of backup felab writes: SQLite's file, pg_dump's archive.
_SQLITE_MAGIC = b"SQLite format 3\x00"
_PG_DUMP_MAGIC = b"PGDMP"
#: pg_dump's custom archive header after its magic: version 1.x, then the sizes of an int and
#: of an offset, then the format (1, custom). A text file that merely begins "PGDMP" is none.
_PG_DUMP_FORMAT_CUSTOM = 1
#: SQLite's application id (header bytes 68-71) that marks a file `felab db backup` wrote: a
#: live felab.db is an SQLite file too, and another data folder's must never pass for an
#: earlier backup. A restore clears it, so the restored database is not taken for a backup.
BACKUP_APPLICATION_ID = 0x46454C42  # "FELB"
_APPLICATION_ID_AT = 68


def _pg_dump_archive(head: bytes) -> bool:
    """Whether a file's first bytes are pg_dump's custom archive header (what backup writes)."""
    return (
        head.startswith(_PG_DUMP_MAGIC)
        and len(head) >= 11
        and head[5] == 1
        and head[8] in (2, 4, 8)
        and head[9] in (4, 8)
        and head[10] == _PG_DUMP_FORMAT_CUSTOM
    )


def _marked_backup(head: bytes) -> bool:
    """Whether an SQLite file's first 100 bytes carry felab's backup mark."""
    at = _APPLICATION_ID_AT
    return int.from_bytes(head[at : at + 4], "big") == BACKUP_APPLICATION_ID


def _refuse_other_engine(source: Path, backend: str) -> None:
    """Refuse, before anything is replaced, a backup of the other engine: pg_dump's archive
    into SQLite, or SQLite's file into PostgreSQL (each tool would only say "not valid")."""
    try:
        with source.open("rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise BackupError(
            f"cannot read {source} ({exc.strerror or exc}): give the backup `felab db backup` "
            "wrote; nothing was replaced"
        ) from None
    if backend == "sqlite" and head.startswith(_PG_DUMP_MAGIC):
        raise BackupError(
            f"{source} is a PostgreSQL backup (pg_dump); this database is SQLite: restore it "
            "into a PostgreSQL database (FELAB_DATABASE_URL); nothing was replaced"
        )
    if backend == "postgresql" and head.startswith(_SQLITE_MAGIC):
        raise BackupError(
            f"{source} is an SQLite backup; this database is PostgreSQL: restore it into an "
            "SQLite database (FELAB_DATABASE_URL=sqlite:///PATH, or unset it for "
            "FELAB_DATA_DIR/felab.db); nothing was replaced"
        )
    if backend == "sqlite" and not head.startswith(_SQLITE_MAGIC):
        raise BackupError(
            f"{source} is not a felab SQLite backup (not an SQLite file): give the file "
            "`felab db backup` wrote; nothing was replaced"
        )
    if backend == "postgresql" and not head.startswith(_PG_DUMP_MAGIC):
        raise BackupError(
            f"{source} is not a felab PostgreSQL backup (pg_dump's custom format): give the "
            "file `felab db backup` wrote; nothing was replaced"
        )


def _writable_file(to: Path, *, force: bool) -> None:
    """Refuse, before any work, a destination that is a folder or cannot be written, and an
    existing file that is not an earlier backup (unless `force`): a backup is written often,
    and a typo must not turn a member export or a content pack into a database."""
    if str(to) == "-":
        raise BackupError("a backup is a file, not standard output: give a file name")
    try:
        refuse_special(to, what="backup, such as felab.bak", to_write=True)
        # another file is refused below, with --force named: a backup has that flag
        check_destinations(
            None, to, what="backup", json_writes=SQLITE_DATABASE, replaces_others=True
        )
        if to.is_file() and not force:
            with to.open("rb") as fh:
                head = fh.read(100)
            if not (head.startswith(_SQLITE_MAGIC) or _pg_dump_archive(head)):
                raise BackupError(
                    f"{to} exists and is not a felab backup: the backup would replace it; give "
                    "a new name, or --force to replace it"
                )
            if head.startswith(_SQLITE_MAGIC) and not _marked_backup(head):
                raise BackupError(
                    f"{to} is an SQLite database that `felab db backup` did not write (another "
                    "data folder's felab.db, or a backup from before backups were marked): the "
                    "backup would replace it; give a new name, or --force to replace it"
                )
        make_folder_for(to, what="backup")
    except (NamedFileError, ResultsFileError, OSError) as exc:
        raise BackupError(str(exc)) from None


def backup(url: str, to: Path, *, force: bool = False) -> Path:
    """Write the database named by `url` to `to` (a file). It is written beside `to` first and
    moved over it only when complete, so a failed backup never destroys an earlier one; an
    existing file that is not a backup is replaced only with `force`."""
    backend = make_url(url).get_backend_name()
    database: Path | None = None
    if backend == "sqlite":
        from felab_core.db.session import make_engine

        make_engine(url, create=False).dispose()  # the URL checked, its folder not made
        database = _sqlite_path(url)
        if _same_file(database, to):  # said before "not a backup": it is the more precise
            raise BackupError(f"{to} is the database itself: back it up to another file")
    _writable_file(to, force=force)
    partial = to.with_name(f".{to.name}.partial")
    partial.unlink(missing_ok=True)
    if database is not None:
        if not database.is_file():  # connecting would make an empty one, and back that up
            raise BackupError(f"the database {database} does not exist: nothing to back up")
        source = sqlite3.connect(database)
        target = sqlite3.connect(partial)
        try:
            source.backup(target)
            target.execute(f"PRAGMA application_id = {BACKUP_APPLICATION_ID}")
            target.commit()
        finally:
            target.close()
            source.close()
        partial.replace(to)
        return to
    if backend == "postgresql":
        out = subprocess.run(
            [_tool("pg_dump"), "--format=custom", "--no-owner", f"--file={partial}", _libpq(url)],
            capture_output=True,
            text=True,
            timeout=3600,
        )
        if out.returncode != 0:
            partial.unlink(missing_ok=True)
            detail = redact(out.stderr.strip()[-500:])
            lowered = detail.lower()
            unreached = ("connection" in lowered and "failed" in lowered) or (
                "could not translate host name" in lowered  # DNS: exit 3, as db status says
            )
            if unreached:
                raise BackupUnreachable(f"pg_dump could not reach the database: {detail}")
            raise BackupError(f"pg_dump failed: {detail}")
        partial.replace(to)
        return to
    raise BackupError(f"felab backs up SQLite and PostgreSQL, not {backend}")


def check_source(source: Path, url: str) -> None:
    """Refuse, before a restore is confirmed, a backup path that names no file or a file that is
    no backup for this database's engine (its first bytes say): the answer to "replace
    everything?" would change nothing."""
    if (link := broken_link(source)) is not None:
        raise BackupError(f"{source} {link}")
    if not source.exists():
        raise BackupError(f"{source} does not exist: give the backup `felab db backup` wrote")
    if not source.is_file():
        raise BackupError(f"{source} is not a file: give the backup `felab db backup` wrote")
    _refuse_other_engine(source, make_url(url).get_backend_name())


def restore(url: str, source: Path) -> None:
    """Replace the database named by `url` with the backup in `source`. Stop the bot and the
    ingest first: what they write meanwhile would be lost."""
    check_source(source, url)
    backend = make_url(url).get_backend_name()
    if backend == "sqlite":
        from felab_core.db.session import make_engine, sqlite_read_only

        make_engine(url, create=False).dispose()  # the URL checked; made once the backup is
        target = _sqlite_path(url)
        if _same_file(source, target):
            raise BackupError(f"{source} is this database itself: give the backup file")
        try:
            refuse_special(target, what="SQLite database, such as felab.db", to_write=True)
        except NamedFileError as exc:
            raise BackupError(f"{exc}; check FELAB_DATABASE_URL or FELAB_DATA_DIR") from None
        why = sqlite_read_only(url)
        if why:
            raise BackupError(
                f"the database was opened read-only ({why} in FELAB_DATABASE_URL): a restore "
                f"replaces it, so run it without {why}"
            )
        check_sqlite_backup(source)  # before anything is replaced
        target.parent.mkdir(parents=True, exist_ok=True)
        src = sqlite3.connect(source)
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
            dst.execute("PRAGMA application_id = 0")  # the live database, no longer a backup
            dst.commit()
        finally:
            dst.close()
            src.close()
        return
    if backend == "postgresql":
        out = subprocess.run(
            [_tool("pg_restore"), "--clean", "--if-exists", "--no-owner", "--single-transaction",
             f"--dbname={_libpq(url)}", str(source)],
            capture_output=True, text=True, timeout=3600,
        )  # fmt: skip
        if out.returncode != 0:
            raise BackupError(f"pg_restore failed: {out.stderr.strip()[-500:]}")
        return
    raise BackupError(f"felab restores SQLite and PostgreSQL, not {backend}")
