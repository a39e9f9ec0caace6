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
from pathlib import Path

from sqlalchemy.engine import make_url

from felab_core.engine.results import ResultsFileError, check_destinations
from felab_core.errors import Invalid
from felab_core.files import NamedFileError, refuse_special
from felab_core.redact import redact


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
    database = make_url(url).database
    if not database:
        raise BackupError("an in-memory SQLite database cannot be backed up")
    return Path(database)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def _writable_file(to: Path) -> None:
    """Refuse, before any work, a destination that is a folder or cannot be written."""
    try:
        refuse_special(to, what="backup, such as felab.bak", to_write=True)
        check_destinations(None, to, what="backup", database_ok=True)
        to.parent.mkdir(parents=True, exist_ok=True)
    except (NamedFileError, ResultsFileError, OSError) as exc:
        raise BackupError(str(exc)) from None


def backup(url: str, to: Path) -> Path:
    """Write the database named by `url` to `to` (a file). It is written beside `to` first and
    moved over it only when complete, so a failed backup never destroys an earlier one."""
    _writable_file(to)
    backend = make_url(url).get_backend_name()
    partial = to.with_name(f".{to.name}.partial")
    partial.unlink(missing_ok=True)
    if backend == "sqlite":
        database = _sqlite_path(url)
        if _same_file(database, to):
            raise BackupError(f"{to} is the database itself: back it up to another file")
        source = sqlite3.connect(database)
        target = sqlite3.connect(partial)
        try:
            source.backup(target)
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
            if "connection" in detail.lower() and "failed" in detail.lower():
                raise BackupUnreachable(f"pg_dump could not reach the database: {detail}")
            raise BackupError(f"pg_dump failed: {detail}")
        partial.replace(to)
        return to
    raise BackupError(f"felab backs up SQLite and PostgreSQL, not {backend}")


def restore(url: str, source: Path) -> None:
    """Replace the database named by `url` with the backup in `source`. Stop the bot and the
    ingest first: what they write meanwhile would be lost."""
    if not source.is_file():
        raise BackupError(f"{source} is not a file: give the backup `felab db backup` wrote")
    backend = make_url(url).get_backend_name()
    if backend == "sqlite":
        try:
            check = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
            check.execute("SELECT count(*) FROM alembic_version").fetchone()
            check.close()
        except sqlite3.DatabaseError:
            raise BackupError(f"{source} is not a felab SQLite backup") from None
        target = _sqlite_path(url)
        if _same_file(source, target):
            raise BackupError(f"{source} is this database itself: give the backup file")
        target.parent.mkdir(parents=True, exist_ok=True)
        src = sqlite3.connect(source)
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
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
