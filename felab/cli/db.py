"""`felab db`: bring the database's schema up to date, or say where it stands.

Also the one place the other database-backed commands get their sessions from, so every one of
them reports an unusable database the same way: one line saying what to run, exit code 2.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import typer
from rich.console import Console
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from felab.cli.boundary import explain_also
from felab.cli.errors import EXIT_USAGE, err
from felab.cli.output import slow_note
from felab_core.db.session import (
    DatabaseError,
    current_revision,
    default_sessions,
    head_revision,
    known_revisions,
    make_engine,
    refuse_foreign,
    sqlite_file,
    upgrade,
)
from felab_core.errors import ServiceError
from felab_core.failures import Failure, explain
from felab_core.files import blocking_file
from felab_core.redact import redact
from felab_core.settings import get_settings
from felab_core.text import with_hidden_shown

db_app = typer.Typer(
    name="db",
    help="The database: schema upgrades (FELAB_DATABASE_URL, else SQLite under FELAB_DATA_DIR).",
    no_args_is_help=True,
)


@contextmanager
def service_errors() -> Iterator[None]:
    """Turn a service or database error into one clear line on stderr and exit code 2."""
    try:
        yield
    except (ServiceError, DatabaseError) as exc:
        failure = explain(exc)  # an unreachable service is exit 3, as everywhere
        err(str(exc))
        raise typer.Exit(code=failure.exit_code if failure else EXIT_USAGE) from None


def sessions() -> sessionmaker[Session]:
    """The configured database's sessions, schema checked (SQLite is upgraded on the spot).
    A failure felab does not expect in the command that asked for them is first checked
    against the stored values (`_unreadable_value`)."""
    with service_errors():
        factory = default_sessions()
    explain_also(partial(_unreadable_value, factory))
    return factory


def _unreadable_value(factory: sessionmaker[Session], _exc: Exception) -> Failure | None:
    """A command that stopped on an error felab does not expect, while the database holds a
    value felab cannot read (a file changed by hand: a time of 'zz'): that value, by table,
    column and row, rather than "a bug in felab". None when every stored value reads."""
    from felab_core.db.readable import unreadable_values

    with factory() as session:
        found = unreadable_values(session.connection(), limit=1)
    if not found:
        return None
    return Failure(
        f"the database {_where()} holds a value felab cannot use: {found[0]} (changed outside "
        "felab?): restore a backup (`felab db restore FILE --yes`), or correct that value",
        EXIT_USAGE,
    )


def _note(line: str) -> None:
    """What a long backup or restore is doing, on stderr (twentieth sweep, b B18: a restore of
    358 MB had checked its rows for 33 s in silence)."""
    shown = with_hidden_shown(line)  # a file's name may hold an escape code
    Console(stderr=True, highlight=False).print(shown, markup=False, style="dim", soft_wrap=True)


def _sized(path: Path) -> str:
    try:
        return f"{path} ({path.stat().st_size / 1e6:,.0f} MB) before anything is replaced"
    except OSError:
        return f"{path} before anything is replaced"


def _where() -> str:
    url = make_url(get_settings().resolved_database_url())  # as given, not as rewritten
    return redact(url.render_as_string(hide_password=True))


@db_app.command("upgrade")
def upgrade_cmd() -> None:
    """Apply every migration the database does not have yet."""
    with service_errors():
        engine = make_engine()
        before = current_revision(engine)
        if engine.dialect.name == "sqlite":  # never write felab's tables into another's file
            refuse_foreign(engine, before)
        upgrade(engine)
        after = current_revision(engine)
    say = Console(highlight=False)
    if before == after:
        say.print(f"{_where()} is already at the latest schema ({after}).", markup=False)
    else:
        say.print(f"{_where()}: {before or 'empty'} -> {after}.", markup=False)


@db_app.command("status")
def status_cmd() -> None:
    """Which database felab uses, and whether its schema is current."""
    with service_errors():
        engine = make_engine(create=False)  # status reads: a mistyped folder is not made
        if engine.dialect.name == "sqlite":
            path = sqlite_file(get_settings().resolved_database_url())
            if path is not None and not path.exists():  # connecting would make an empty one
                if (above := blocking_file(path.parent)) is not None:  # nor could upgrade
                    err(
                        f"no database at {path}: {above} is not a folder (a file or a device), "
                        "so none can be made there; check FELAB_DATA_DIR or FELAB_DATABASE_URL"
                    )
                else:
                    err(
                        f"no database at {path} (check FELAB_DATA_DIR or FELAB_DATABASE_URL); "
                        "`felab db upgrade` creates it"
                    )
                raise typer.Exit(EXIT_USAGE)
        current = current_revision(engine)
        if engine.dialect.name == "sqlite":  # not felab's: `db upgrade` would refuse it too
            refuse_foreign(engine, current)
    head = head_revision()
    if current is not None and current != head and current not in known_revisions():
        err(
            f"{_where()} is at schema {current}, which this felab does not know (made by a "
            "newer felab?): upgrade felab, or point FELAB_DATABASE_URL / FELAB_DATA_DIR at "
            "this felab's database"
        )
        raise typer.Exit(EXIT_USAGE)
    state = "current" if current == head else f"behind: run `felab db upgrade` (latest is {head})"
    Console(highlight=False).print(
        f"database: {_where()}\nschema: {current or 'empty'} ({state})\n"
        f"content folder: {_content_folder(get_settings().content_dir)}",
        markup=False,
    )


def _content_folder(folder: Path) -> str:
    """The content folder, and what is wrong with it when it cannot hold packs (a mistyped
    FELAB_CONTENT_DIR was shown as if it were there; `content load` then said it was not)."""
    if folder.exists():  # (a file there is refused with the settings)
        return str(folder)
    return f"{folder} (missing: check FELAB_CONTENT_DIR; `felab content load` reads packs there)"


def _file_name(value: str, give: str) -> Path:
    """A backup's file name as typed: an empty one (an unset shell variable) is said, not read
    as the current folder (Path("") is ".")."""
    if not value.strip():
        err(f"the file name is empty: give {give}")
        raise typer.Exit(EXIT_USAGE)
    if value.endswith(("/", os.sep)) and not Path(value).is_dir():  # Path() drops the slash
        err(
            f"{value} ends in '/', a folder's mark, but there is no such folder: name a file "
            "without the '/', or create the folder first"
        )
        raise typer.Exit(EXIT_USAGE)
    return Path(value)


@db_app.command("backup")
def backup_cmd(
    to: str = typer.Argument(
        ...,
        help="The file to write (an earlier backup there is replaced; any other file only "
        "with --force).",
        show_default=False,
    ),
    force: bool = typer.Option(
        False, "--force", help="Replace TO even when it is not an earlier backup."
    ),
) -> None:
    """Copy the whole database to a file: SQLite's own online backup, or pg_dump for
    PostgreSQL (safe while the bot and the ingest run). Redis needs none (see `restore`)."""
    from felab_core.ops.backup import backup, process_started

    path = _file_name(to, "the file to write the backup to, such as felab.bak")
    with service_errors(), slow_note(_note, f"copying {_where()} to {path}..."):
        url = get_settings().resolved_database_url()
        done = backup(url, path, force=force, started=process_started())
    Console(highlight=False).print(f"{_where()} backed up to {done}", markup=False)


@db_app.command("restore")
def restore_cmd(
    source: str = typer.Argument(..., help="A file `felab db backup` wrote."),
    yes: bool = typer.Option(False, "--yes", help="Yes: replace this database with the backup."),
) -> None:
    """Replace this database with a backup (stop the bot and the ingest first). Then run
    `felab broker setup`: it makes the broker's users again from the restored database."""
    from felab_core.ops.backup import check_source, process_started, restore

    path = _file_name(source, "the backup `felab db backup` wrote")
    with service_errors():  # said before --yes is asked for: the answer would change nothing
        check_source(path, get_settings().resolved_database_url())
    if not yes:
        err(f"this replaces everything in {_where()}: run again with --yes to do it")
        raise typer.Exit(EXIT_USAGE)
    with service_errors(), slow_note(_note, f"checking {_sized(path)}, then copying it in..."):
        note = restore(get_settings().resolved_database_url(), path, started=process_started())
    Console(highlight=False).print(
        f"{_where()} restored from {path}; now `felab broker setup` (the broker's users)",
        markup=False,
    )
    if note is not None:
        _note(f"note: {note}")
