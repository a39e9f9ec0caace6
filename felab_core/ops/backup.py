"""Backing up and restoring felab's database, SQLite or PostgreSQL, to move a cohort's server.

SQLite: SQLite's own online backup (consistent while the bot and the ingest run). PostgreSQL:
`pg_dump --format=custom` and `pg_restore --clean`, the tools that come with PostgreSQL's
client (their major version must be the server's or newer). Redis needs no backup: it carries
messages (a lost one is sent again) and users (made again from the database by
`felab broker setup` or the ingest).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

from sqlalchemy.engine import make_url

from felab_core.engine.results import ResultsFileError, check_destinations
from felab_core.failures import unreadable_sqlite
from felab_core.files import (
    SQLITE_DATABASE,
    NamedFileError,
    broken_link,
    make_folder_for,
    refuse_special,
)
from felab_core.ops.backup_checks import BackupError, check_sqlite_backup
from felab_core.redact import redact


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


def backup(url: str, to: Path, *, force: bool = False, started: float | None = None) -> Path:
    """Write the database named by `url` to `to` (a file). It is written beside `to` first and
    moved over it only when complete, so a failed backup never destroys an earlier one; an
    existing file that is not a backup is replaced only with `force`. A lock is waited on until
    LOCK_WAIT_S after `started` (time.monotonic(); the command's start, else now)."""
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
        deadline = _deadline(started)
        _check_live(url, database, deadline)
        try:
            _copy_sqlite(
                database, partial, BACKUP_APPLICATION_ID, locked=database, deadline=deadline
            )
            _check_copy(database, partial)
        except sqlite3.DatabaseError as exc:  # damaged past the pages _check_live read
            partial.unlink(missing_ok=True)
            raise _unreadable(database, str(exc)) from None
        except BackupError:
            partial.unlink(missing_ok=True)
            raise
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


#: How long a backup or restore waits for a database another process holds locked (a long
#: write of the bot or the ingest, a sqlite3 shell left open): SQLite's copy had retried
#: forever, in silence (twentieth sweep, b B20). Counted from the command's start, so its
#: message comes well inside 30 s (twenty-second sweep, b B8: 30 s of wait after start-up
#: had met `timeout 30` first, and nothing was said).
LOCK_WAIT_S = 15.0

#: The least wait for a lock, however long the command took to start.
_MIN_LOCK_WAIT_S = 1.0


def process_started() -> float:
    """When this process started, on time.monotonic()'s clock (now where it cannot be read)."""
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime, in clock ticks
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        ago = uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.monotonic()
    return time.monotonic() - max(ago, 0.0)


def _deadline(started: float | None) -> float:
    start = time.monotonic() if started is None else started
    return max(start + LOCK_WAIT_S, time.monotonic() + _MIN_LOCK_WAIT_S)


class _StillLocked(Exception):
    pass


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.0)


def _copy_sqlite(
    source: Path, target: Path, application_id: int, *, locked: Path, deadline: float
) -> None:
    """SQLite's online backup of `source` into `target`, marked with `application_id`; the
    database `locked` names is the one a lock is blamed on. A lock is waited on until
    `deadline` (time.monotonic()), the command's one budget (twenty-first sweep: SQLite's own
    busy wait in a step and the steps retried after it had added up, 61 s for "30 s")."""

    def progress(status: int, remaining: int, total: int) -> None:
        if status in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) and time.monotonic() >= deadline:
            raise _StillLocked

    src = sqlite3.connect(source, timeout=_left(deadline))
    dst = sqlite3.connect(target, timeout=_left(deadline))
    try:
        src.backup(dst, pages=1024, progress=progress, sleep=0.1)
        dst.execute(f"PRAGMA application_id = {application_id}")
        dst.commit()
    except _StillLocked:
        raise BackupUnreachable(_locked(locked)) from None
    except sqlite3.OperationalError as exc:
        said = str(exc)
        if "locked" in said or "busy" in said:
            raise BackupUnreachable(_locked(locked)) from None
        if "readonly" in said or "unable to open" in said:
            raise BackupError(
                f"cannot write {target} ({said}): check that you may write the file and its "
                "folder; nothing was replaced"
            ) from None
        raise BackupError(f"SQLite could not copy {source} to {target}: {said}") from None
    finally:
        dst.close()
        src.close()


class _Unreadable(Exception):
    """SQLite cannot read the database: damaged, cut short, or not an SQLite file."""


def _unreadable(database: Path, said: str) -> BackupError:
    """A backup refused: the live database cannot be read, in the words every command uses."""
    words = unreadable_sqlite(str(database), said) or f"cannot read {database} ({said})"
    return BackupError(f"{words}; nothing was backed up")


def _tables(database: Path, deadline: float) -> list[str]:
    """The tables of an existing SQLite file; _Unreadable when SQLite cannot read it, and
    BackupUnreachable when another process holds it locked until `deadline`."""
    con = sqlite3.connect(database, timeout=_left(deadline))
    try:
        rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise BackupUnreachable(_locked(database)) from None
        raise
    except sqlite3.DatabaseError as exc:  # SQLITE_CORRUPT, SQLITE_NOTADB
        raise _Unreadable(str(exc)) from None
    finally:
        con.close()
    return [str(name) for (name,) in rows]


def _check_live(url: str, database: Path, deadline: float) -> None:
    """Refuse, before anything is copied, a live database SQLite cannot read, an empty one,
    or another program's (refused as every other command refuses it): `db restore` would
    refuse the copy, and the backup had said "backed up" (sweep 24, M3 and M5)."""
    from felab_core.db.session import DatabaseError, make_engine, refuse_foreign

    try:
        tables = _tables(database, deadline)
    except _Unreadable as exc:
        raise _unreadable(database, str(exc)) from None
    if not tables:
        raise BackupError(
            f"the database {database} is empty (no felab schema yet): nothing to back up; "
            "check FELAB_DATABASE_URL or FELAB_DATA_DIR"
        )
    engine = make_engine(url, create=False)
    try:
        refuse_foreign(engine, tables=tables)
    except DatabaseError as exc:
        raise BackupError(f"{exc}; nothing was backed up") from None
    finally:
        engine.dispose()


def _check_copy(database: Path, copy: Path) -> None:
    """SQLite's quick check of a fresh copy: a page damaged inside the live file is copied as
    it is, and `db restore` would refuse the backup only when it is needed."""
    con = sqlite3.connect(copy)
    try:
        said = [str(row[0]) for row in con.execute("PRAGMA quick_check(1)").fetchall()]
    finally:
        con.close()
    if said != ["ok"]:
        first = " ".join(" ".join(said).replace("*** in database main ***", "").split())[:200]
        raise _unreadable(database, f"database disk image is malformed: {first}")


def _set_aside(target: Path) -> Path:
    """Move a live database SQLite cannot read out of a restore's way, with its journal files
    (a hot journal beside the new file would be played into it), to a name not yet taken."""
    kept = target.with_name(f"{target.name}.unreadable")
    n = 1
    while any(Path(f"{kept}{end}").exists() for end in ("", "-journal", "-wal", "-shm")):
        n += 1
        kept = target.with_name(f"{target.name}.unreadable-{n}")
    for end in ("-journal", "-wal", "-shm", ""):  # the database last: its journals go with it
        if Path(f"{target}{end}").exists():
            Path(f"{target}{end}").replace(Path(f"{kept}{end}"))
    return kept


def _wait_unlocked(database: Path, deadline: float) -> None:
    """Wait, until `deadline`, for another process's write lock on `database` to go (nothing is
    written); BackupUnreachable if it stays. Other errors are left to the copy to say."""
    if not database.is_file():
        return
    try:
        con = sqlite3.connect(database, timeout=_left(deadline), isolation_level=None)
    except sqlite3.Error:
        return
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise BackupUnreachable(_locked(database)) from None
    except sqlite3.Error:
        pass
    finally:
        con.close()


def _locked(database: Path) -> str:
    return (
        f"the database {database} stayed locked by another process for {LOCK_WAIT_S:.0f} s (a "
        "long write of the bot or the ingest, a sqlite3 shell left open?): nothing was "
        "written; try again when it is idle"
    )


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


def restore(url: str, source: Path, *, started: float | None = None) -> str | None:
    """Replace the database named by `url` with the backup in `source`. Stop the bot and the
    ingest first: what they write meanwhile would be lost. A lock is waited on as backup's.
    A live SQLite file SQLite cannot read (damaged, cut short) is what a restore is for: it is
    moved aside, and the words returned say where (None when there was nothing to say)."""
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
        deadline = _deadline(started)  # one budget for the whole restore
        _wait_unlocked(target, deadline)  # a locked database said before the checks' time
        check_sqlite_backup(source)  # before anything is replaced
        target.parent.mkdir(parents=True, exist_ok=True)
        said: str | None = None
        if target.is_file():
            try:
                _tables(target, deadline)
            except _Unreadable as exc:
                said = str(exc)
            except sqlite3.OperationalError:  # a file it may not open: the copy says so
                pass
        try:  # application_id 0: the live database, no longer a backup
            if said is None:
                _copy_sqlite(source, target, 0, locked=target, deadline=deadline)
        except sqlite3.DatabaseError as exc:  # damaged past the pages read above
            if unreadable_sqlite(str(target), str(exc)) is None:
                raise
            said = str(exc)
        if said is None:
            return None
        kept = _set_aside(target)
        _copy_sqlite(source, target, 0, locked=target, deadline=deadline)
        return (
            f"the database it replaced could not be read (SQLite: {said}); that file is kept "
            f"as {kept}"
        )
    if backend == "postgresql":
        out = subprocess.run(
            [_tool("pg_restore"), "--clean", "--if-exists", "--no-owner", "--single-transaction",
             f"--dbname={_libpq(url)}", str(source)],
            capture_output=True, text=True, timeout=3600,
        )  # fmt: skip
        if out.returncode != 0:
            raise BackupError(f"pg_restore failed: {out.stderr.strip()[-500:]}")
        return None
    raise BackupError(f"felab restores SQLite and PostgreSQL, not {backend}")
